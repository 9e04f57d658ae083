"""hookbay forwarder and recorder: delivery, retries, attempts, MongoDB materialisation"""

"""hookbay ingest: the receiving endpoint POST /w/{username}/{webhook-name}"""

"""hookbay shared code.

Knows settings, ids, models, topics, serialisation, MongoDB access, logging, metrics and the error
hierarchy. It never imports a service; services build on it and never import each other.
"""

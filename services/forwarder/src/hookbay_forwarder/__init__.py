"""hookbay forwarder service: one subpackage per process role (``delivery``: the forwarder,
``recorder``, ``stats``), started by ``python -m hookbay_forwarder [forwarder|recorder|stats]``;
``settings``, ``metrics``, ``ops`` and ``process`` are shared by the roles."""

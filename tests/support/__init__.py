"""The test support package: what more than one test folder uses (tests/README.md, "Layout").

Imported as ``support.<module>`` (the root conftest puts tests/ on ``sys.path``, as the mutant
runner's ``PYTHONPATH`` does):

* ``builders``: the one builder of catalogue works, configs and the fake Pixiv;
* ``jobs`` (the Workflow Protocol v1 calls, a callback receiver, a channel that loses answers),
  ``protocol_schema``, ``queues``, ``delivery`` (``drive``), ``ui``, ``cli``, ``raw_http``;
* the route receivers and worlds: ``route_receiver``, ``example_routes``, ``published_routes``;
* the crash and race histories several capabilities replay: ``dying_ledger``, ``cancel_races``.
"""

"""The test support package: what more than one test folder uses (tests/README.md, "Layout").

Imported as ``support.<module>`` (the root conftest puts tests/ on ``sys.path``, as the mutant
runner's ``PYTHONPATH`` does): ``builders`` (catalogue works, configs, the fake Pixiv), ``jobs`` (the
Workflow Protocol v1 calls and a callback receiver), ``protocol_schema``, ``cli``, ``raw_http``,
``route_receiver``, ``dying_ledger``, and the helpers several capabilities' tests share.
"""

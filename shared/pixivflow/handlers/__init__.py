"""One entry module per Lambda function: ``functions/<name>/app.py`` imports its
own, and each imports at module level only what its function needs on every invocation, nothing
for the other four (a handler module imports at most ~1.3x the bare boto3 + Powertools +
pydantic stack; ``make bench`` measures it). The runtime graph, the config, the services and the
HTTP resolvers are imported by the first invocation that needs them: importing a handler creates
no AWS client and reads no config.
"""

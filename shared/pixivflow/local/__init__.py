"""The embedded runtime: provisioning from template.yaml (moto, queue pump, clock and dev server build on it).

Importing this package creates no AWS client and does not import moto.
"""

from pixivflow.local.provision import provision

__all__ = ["provision"]

"""``python -m pixivflow.cli``: the `pixivflow` command."""

from . import main

raise SystemExit(main())

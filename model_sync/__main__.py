"""`python -m model_sync ...` is `model-sync ...`."""

import sys

from model_sync.cli import main

sys.exit(main())

"""``python -m kafkalog.demo``: the same as ``kafkalog demo``."""

import sys

from kafkalog.demo.main import main

sys.exit(main())

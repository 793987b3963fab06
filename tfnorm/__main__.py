from __future__ import annotations

import sys

from tfnorm.cli.main import main

sys.exit(main())

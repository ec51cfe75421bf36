import sys

from lakesink.cli.main import main

sys.exit(main())

import sys

from warptrace.cli import main

sys.exit(main())

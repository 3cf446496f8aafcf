import sys

from bench.nexmark.runner import main

sys.exit(main())

import sys

from selfplay.cluster.driver import main

sys.exit(main())

import sys

from selfplay.bench import main

sys.exit(main())

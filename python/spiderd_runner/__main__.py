import sys

from spiderd_runner import main

sys.exit(main())

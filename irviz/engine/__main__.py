import os
import sys

from irviz.engine.loop import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
# skip interpreter teardown: torch/TVM finalizers take seconds (and TVM's can crash)
os._exit(code)

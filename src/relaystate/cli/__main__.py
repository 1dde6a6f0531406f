"""``python -m relaystate.cli``."""

from . import main

main()

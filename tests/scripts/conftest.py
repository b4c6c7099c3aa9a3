"""The script tests stop scripts as a user's Ctrl-C would. Started as a background job of a
non-interactive shell (`scripts/test &`, `nohup`), pytest inherits SIGINT ignored, and so does
every script it starts: Python then installs no KeyboardInterrupt handler, a bash script cannot
trap it, and a test's SIGINT is lost (five such tests once failed that way here). Taking SIGINT
back gives each child the default disposition, as a terminal's foreground job has."""
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

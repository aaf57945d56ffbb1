"""python -m gpufeed why|run SCRIPT [ARGS...]: the script as `python SCRIPT
ARGS` would run it, with gpufeed around its DataLoaders (why.py, run.py)."""
import sys

USAGE = """\
usage: python -m gpufeed why SCRIPT [ARGS...]
       python -m gpufeed run SCRIPT [ARGS...]

  why  runs SCRIPT as `python SCRIPT ARGS` would and, when it ends, says on
       stderr for each DataLoader how long the script waited for its batches
       (the first batch, worker start-up, apart), batches/s and images/s, the
       verdict (input-bound, compute-bound or balanced, as gpufeed bench says
       it) and whether gpufeed.DataLoader can take it, or exactly why not.
  run  runs SCRIPT with gpufeed.DataLoader in place of every torch DataLoader
       it can take, torch's for the rest; one line each on stderr says which.

The script's output and exit status are its own."""


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if not argv or argv[0] not in ("why", "run"):
        if argv:
            print(f"python -m gpufeed: unknown command {argv[0]!r}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == "why":
        from . import why as command
    else:
        from . import run as command
    return command.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

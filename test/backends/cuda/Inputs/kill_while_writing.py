"""Kills `sitsc -o` at many moments and checks what is left beside the output.

    kill_while_writing.py FOLDER -- SITSC ARGS... (the output is FOLDER/out.sits)

Each round starts sitsc in an empty FOLDER (or, with --force, one holding an
old out.sits), watches the folder and sends a signal (SIGTERM, SIGINT or
SIGKILL in turn; no SIGKILL when replacing) as soon as any new name appears in it, or after a delay
that grows round by round when none does. Afterwards the folder must hold
nothing but the old file, untouched, or a complete engine: never a
temporary, never a partial file. Exits 1 naming the first round that fails.
"""
import os
import signal
import subprocess
import sys
import time

OLD = b"the old engine\n"


def main():
    folder = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1:]
    signals = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]
    delays = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2, 2.0]
    landed = 0
    for round_index, delay in enumerate(delays * 2):
        replace = round_index >= len(delays)
        # Replacing, the unnamed file gets a name beside the target for the
        # instant between link and rename: removed on SIGTERM and SIGINT,
        # not on SIGKILL.
        sig = signals[round_index % (2 if replace else 3)]
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        out = os.path.join(folder, "out.sits")
        if replace:
            with open(out, "wb") as f:
                f.write(OLD)
        before = set(os.listdir(folder))
        args = command + ["-o", out] + (["--force"] if replace else [])
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        start = time.monotonic()
        seen = None
        while process.poll() is None:
            names = set(os.listdir(folder)) - before
            if names or time.monotonic() - start >= delay:
                seen = names
                break
        if process.poll() is None:
            process.send_signal(sig)
            if seen:
                landed += 1
        code = process.wait()
        left = sorted(os.listdir(folder))
        where = "round %d (%s after %.2fs%s, exit %d)" % (
            round_index, signal.Signals(sig).name, delay,
            ", replacing" if replace else "", code)
        if any(name != "out.sits" for name in left):
            sys.exit("%s: left %s" % (where, left))
        if "out.sits" in left:
            with open(out, "rb") as f:
                data = f.read()
            if data != OLD:
                check = subprocess.run(["sits-run", "--check", out],
                                       capture_output=True)
                if check.returncode != 0:
                    sys.exit("%s: out.sits is neither the old file nor a "
                             "valid engine: %s" % (where, check.stderr))
        elif replace:
            sys.exit("%s: the old out.sits is gone" % where)
    print("ok: %d rounds, %d killed while a new file was in the folder"
          % (len(delays) * 2, landed))


if __name__ == "__main__":
    main()

"""Record, in package-lock.json, the other platforms' optional binaries that this machine's
registry does not serve (biome's and tailwind's), so that `npm ci` finds the lock in sync.

npm leaves an optional dependency out of the lock when the registry answers 404 for it, and
`npm ci` then refuses the lock; an entry with its platform is all `npm ci` needs to skip it
here. Run after `npm install` changed the lock: `python3 fix-lock.py`."""

import json
import re
from pathlib import Path

lock_path = Path(__file__).with_name("package-lock.json")
lock = json.loads(lock_path.read_text())
packages = lock["packages"]
for entry in list(packages.values()):
    for name, version in entry.get("optionalDependencies", {}).items():
        where = f"node_modules/{name}"
        if where in packages:
            continue
        if name.endswith("-wasm32-wasi"):
            os_, cpu, libc = None, "wasm32", None
        else:
            m = re.search(
                r"-(android|darwin|linux|win32|freebsd)-(x64|arm64|arm|ia32)(?:-(musl|gnu\w*|msvc))?$",
                name,
            )
            if not m:
                raise SystemExit(f"no platform in {name}")
            os_, cpu, libc = m.groups()
        added = {"version": version, "cpu": [cpu], "dev": entry.get("dev", False), "optional": True}
        if os_:
            added["os"] = [os_]
        if libc and libc != "msvc":
            added["libc"] = ["musl" if libc == "musl" else "glibc"]
        if not added["dev"]:
            del added["dev"]
        packages[where] = dict(sorted(added.items()))
lock["packages"] = {k: packages[k] for k in sorted(packages, key=lambda k: (k != "", k))}
lock_path.write_text(json.dumps(lock, indent=2) + "\n")

"""Unpacks Kubernetes JSON schemas from a kubernetes-validate wheel for kubeconform.

kubernetes-validate (PyPI) ships standalone schemas per Kubernetes version; kubeconform resolves
``$ref`` relative to the file and is confused by their ``$id``, so each file loses its ``$id`` and
its ``"/api/_definitions.json#`` references become ``"_definitions.json#``.

usage: python3 k8s_schemas.py WHEEL OUTDIR VERSION...   (e.g. 1.27.0 1.37.0; strict schemas)
"""

import json
import sys
import zipfile
from pathlib import Path


def main() -> None:
    wheel, out, *versions = sys.argv[1:]
    with zipfile.ZipFile(wheel) as archive:
        for version in versions:
            prefix = f"kubernetes_validate/kubernetes-json-schema/v{version}-local-strict/"
            target = Path(out) / f"v{version}-local-strict"
            target.mkdir(parents=True, exist_ok=True)
            names = [n for n in archive.namelist() if n.startswith(prefix) and n.endswith(".json")]
            if not names:
                sys.exit(f"no schemas for Kubernetes {version} in {wheel}")
            for name in names:
                text = (
                    archive.read(name)
                    .decode()
                    .replace('"/api/_definitions.json#', '"_definitions.json#')
                )
                schema = json.loads(text)
                if isinstance(schema, dict):
                    schema.pop("$id", None)
                (target / name[len(prefix) :]).write_text(json.dumps(schema))


if __name__ == "__main__":
    main()

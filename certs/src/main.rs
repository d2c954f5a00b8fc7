use clap::Parser as _;

fn main() -> anyhow::Result<()> {
    styrmin_certs::cli::Args::parse().run()
}

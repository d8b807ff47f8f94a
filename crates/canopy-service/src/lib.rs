//! `canopy serve`: the multi-repo HTTP service. (Being implemented.)

/// Arguments of `canopy serve`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {}

/// Runs the service until interrupted.
pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("the HTTP service is not implemented yet")
}

//! `tracing` to stderr, plain or JSON, filtered by `--log-filter`.

use tracing_subscriber::EnvFilter;

/// The log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Plain,
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("--log-filter {filter:?} is not a valid filter")]
    Filter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("a global logger is already installed")]
    AlreadySet,
}

/// Installs the global subscriber.
pub fn init(format: LogFormat, filter: &str) -> Result<(), TelemetryError> {
    let env_filter = EnvFilter::try_new(filter).map_err(|source| TelemetryError::Filter {
        filter: filter.to_owned(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    result.map_err(|_| TelemetryError::AlreadySet)
}

//! `tracing` to stderr, plain or JSON, filtered by `--log-filter`; and how an error is
//! written into a log line.

use std::error::Error;
use std::fmt;

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

/// An error and its causes on one line, `outer: cause: cause`, for a log field:
/// `tracing::error!(error = %ErrorChain(&error), "...")`. The libraries' errors keep their
/// causes as `#[source]`, so each cause is printed once, here.
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read policy file policy.yaml")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_chain_prints_each_cause_once() {
        let error = Outer(std::io::Error::other("permission denied"));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "cannot read policy file policy.yaml: permission denied"
        );
        let alone = std::io::Error::other("broken pipe");
        assert_eq!(ErrorChain(&alone).to_string(), "broken pipe");
    }
}

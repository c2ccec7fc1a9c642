//! Opening a PostgreSQL connection for the store: the client, with its
//! connection driven on a task of its own until it closes.

use tokio_postgres::{Client, NoTls};

use crate::error::{KmsError, Result};

/// A new connection to `url`, with these session `options` added to the
/// URL's own.
pub(super) async fn connect(url: &str, options: Option<&str>) -> Result<Client> {
    let (client, connection) = match options {
        None => tokio_postgres::connect(url, NoTls).await?,
        Some(extra) => {
            let mut config: tokio_postgres::Config = url.parse()?;
            let options = match config.get_options() {
                Some(given) => format!("{given} {extra}"),
                None => extra.to_owned(),
            };
            config.options(&options);
            config.connect(NoTls).await?
        }
    };
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!("postgresql connection closed: {}", KmsError::from(error));
        }
    });
    Ok(client)
}

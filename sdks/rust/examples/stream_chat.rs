//! Streams a delegating chat: `cargo run --example stream_chat` against a mesh with
//! examples/coordinator-worker.yaml applied.
use agentmesh::{proto::common::v1::run_event::Kind, Client};
use tokio_stream::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agentmesh::Error> {
    let (email, password) = (
        std::env::var("AGENTMESH_EMAIL").unwrap_or_default(),
        std::env::var("AGENTMESH_PASSWORD").unwrap_or_default(),
    );
    let mesh = Client::sign_in("127.0.0.1:50050", &email, &password).await?;
    let mut events = mesh
        .stream_chat("demo/coordinator", "Please process task 42", "")
        .await?;
    while let Some(event) = events.next().await.transpose()? {
        if let Some(Kind::RunCompleted(done)) = &event.kind {
            println!(
                "{:?} {}: {}",
                event.delegation_path, event.agent, done.content
            );
        }
    }
    Ok(())
}

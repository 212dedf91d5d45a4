//! Generates the gRPC clients from the public protos (protos/ less the internal packages under
//! agentmesh/internal/) with tonic-prost-build, using the protoc that protoc-bin-vendored ships (no
//! system protoc needed).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    let root = "../../protos";
    let protos = [
        "agentmesh/common/v1/run.proto",
        "agentmesh/common/v1/types.proto",
        "agentmesh/gateway/v1/gateway_service.proto",
        "agentmesh/memory/v1/memory_service.proto",
        "agentmesh/memory/v1/resources.proto",
        "agentmesh/registry/v1/registry_service.proto",
        "agentmesh/registry/v1/resources.proto",
    ]
    .map(|proto| format!("{root}/{proto}"));
    tonic_prost_build::configure()
        .build_server(false)
        // google.rpc.Status (RunFailed.status) is tonic-types' own message.
        .extern_path(".google.rpc.Status", "::tonic_types::Status")
        .compile_protos(&protos, &[root.to_string()])?;
    Ok(())
}

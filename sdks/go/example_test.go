package agentmesh_test

import (
	"context"
	"fmt"
	"log"
	"os"

	agentmesh "github.com/agentmesh/agentmesh/sdks/go"
)

// Streams a delegating chat from a mesh with examples/coordinator-worker.yaml applied.
func Example() {
	ctx := context.Background()
	mesh, err := agentmesh.SignIn(ctx, "127.0.0.1:50050", os.Getenv("AGENTMESH_EMAIL"), os.Getenv("AGENTMESH_PASSWORD"))
	if err != nil {
		log.Fatal(err)
	}
	defer mesh.Close()
	for event, err := range mesh.StreamChat(ctx, "demo/coordinator", "Please process task 42", "") {
		if err != nil {
			log.Fatal(err)
		}
		if done := event.GetRunCompleted(); done != nil {
			fmt.Println(event.GetDelegationPath(), event.GetAgent(), done.GetContent())
		}
	}
}

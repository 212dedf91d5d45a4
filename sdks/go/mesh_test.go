package agentmesh_test

// The SDK against a live mesh with examples/coordinator-worker.yaml applied. The gateway's
// address and a user's credentials come from AGENTMESH_ADDRESS, AGENTMESH_EMAIL and
// AGENTMESH_PASSWORD (tests/e2e/test_sdks.py sets them); without them the tests skip.

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	agentmesh "github.com/agentmesh/agentmesh/sdks/go"
	commonv1 "github.com/agentmesh/agentmesh/sdks/go/gen/agentmesh/common/v1"
	"google.golang.org/grpc/codes"
)

func signIn(t *testing.T) (context.Context, *agentmesh.Client) {
	t.Helper()
	address := os.Getenv("AGENTMESH_ADDRESS")
	if address == "" {
		t.Skip("AGENTMESH_ADDRESS is not set (no mesh to test against)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	mesh, err := agentmesh.SignIn(ctx, address, os.Getenv("AGENTMESH_EMAIL"), os.Getenv("AGENTMESH_PASSWORD"))
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	t.Cleanup(func() { mesh.Close() })
	return ctx, mesh
}

// delegatingChat streams the coordinator's chat and returns its events.
func delegatingChat(t *testing.T, ctx context.Context, mesh *agentmesh.Client) []*commonv1.RunEvent {
	t.Helper()
	var events []*commonv1.RunEvent
	for event, err := range mesh.StreamChat(ctx, "demo/coordinator", "Please process task 42", "") {
		if err != nil {
			t.Fatalf("stream chat: %v", err)
		}
		events = append(events, event)
	}
	if len(events) == 0 {
		t.Fatal("no events")
	}
	return events
}

func TestStreamChatDelegates(t *testing.T) {
	ctx, mesh := signIn(t)
	events := delegatingChat(t, ctx, mesh)

	first, last := events[0], events[len(events)-1]
	if first.GetRunStarted() == nil || first.GetSessionId() == "" {
		t.Fatalf("first event is not the run's start: %v", first)
	}
	workerDone := slices.ContainsFunc(events, func(e *commonv1.RunEvent) bool {
		return len(e.GetDelegationPath()) > 0 && e.GetRunCompleted() != nil
	})
	if !workerDone {
		t.Error("no run_completed of the worker (with a delegation path) arrived")
	}
	done := last.GetRunCompleted()
	if done == nil || len(last.GetDelegationPath()) != 0 || last.GetRunId() != first.GetRunId() {
		t.Fatalf("the stream does not end with the addressed run's run_completed: %v", last)
	}
	if !strings.Contains(done.GetContent(), "worker processed task 42") {
		t.Errorf("answer: %q", done.GetContent())
	}
}

func TestChatAnswers(t *testing.T) {
	ctx, mesh := signIn(t)
	answer, err := mesh.Chat(ctx, "demo/coordinator", "Please process task 42", "")
	if err != nil {
		t.Fatal(err)
	}
	if answer.GetSessionId() == "" || !strings.Contains(answer.GetContent(), "task 42") {
		t.Fatalf("answer: %v", answer)
	}
}

func TestUnknownAgentIsNotFound(t *testing.T) {
	ctx, mesh := signIn(t)
	for _, err := range mesh.StreamChat(ctx, "demo/no-such-agent", "hello", "") {
		var meshErr *agentmesh.Error
		if !errors.As(err, &meshErr) {
			t.Fatalf("want *agentmesh.Error, got %v", err)
		}
		if meshErr.Code != codes.NotFound || meshErr.Reason != "AGENT_NOT_FOUND" {
			t.Fatalf("want NOT_FOUND/AGENT_NOT_FOUND, got %v", meshErr)
		}
		return
	}
	t.Fatal("the stream ended without an error")
}

func TestSessionEventsPageAndFollow(t *testing.T) {
	ctx, mesh := signIn(t)
	session := delegatingChat(t, ctx, mesh)[0].GetSessionId()

	var seqs []int64
	pages := 0
	opts := agentmesh.ListEventsOptions{PageSize: 2}
	for {
		page, err := mesh.ListEvents(ctx, session, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 2 {
			t.Fatalf("page of %d events with page size 2", len(page.Events))
		}
		pages++
		for _, event := range page.Events {
			seqs = append(seqs, event.GetSeq())
		}
		if opts.PageToken = page.NextPageToken; opts.PageToken == "" {
			break
		}
	}
	if pages < 2 {
		t.Fatalf("expected several pages, got %d", pages)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("seqs are not 1..n in order: %v", seqs)
		}
	}
	var all []int64
	for event, err := range mesh.AllEvents(ctx, session, 3) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, event.GetSeq())
	}
	if !slices.Equal(all, seqs) {
		t.Fatalf("AllEvents %v, pages %v", all, seqs)
	}

	var followed []int64
	for event, err := range mesh.FollowSession(ctx, session, 2) {
		if err != nil {
			t.Fatal(err)
		}
		followed = append(followed, event.GetSeq())
		if event.GetSeq() == seqs[len(seqs)-1] {
			break // the rest would arrive only when the session grows
		}
	}
	if !slices.Equal(followed, seqs[2:]) {
		t.Fatalf("followed from seq 2: %v, want %v", followed, seqs[2:])
	}
}

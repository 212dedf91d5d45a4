package agentmesh

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is what every call of this package returns when the mesh (or the connection) fails: the
// gRPC status code and message, plus the google.rpc.ErrorInfo the services attach to every error
// (decoded from the grpc-status-details-bin trailer). Reason is UPPER_SNAKE, e.g.
// "AGENT_NOT_FOUND"; it is empty when the status carried no ErrorInfo (a transport failure, say).
//
//	var meshErr *agentmesh.Error
//	if errors.As(err, &meshErr) && meshErr.Code == codes.NotFound { ... }
type Error struct {
	Code     codes.Code
	Message  string
	Reason   string
	Domain   string
	Metadata map[string]string
	status   *status.Status
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("agentmesh: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("agentmesh: %s (%s): %s", e.Code, e.Reason, e.Message)
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// asError turns a gRPC call's error into an *Error; nil stays nil, an *Error passes through.
func asError(err error) error {
	if err == nil {
		return nil
	}
	var meshErr *Error
	if errors.As(err, &meshErr) {
		return err
	}
	st := status.Convert(err)
	result := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			result.Reason, result.Domain, result.Metadata = info.GetReason(), info.GetDomain(), info.GetMetadata()
			break
		}
	}
	return result
}

//! The few Spark Connect messages dpkit sends and reads, declared by hand
//! with their field numbers from Apache Spark's `spark/connect/base.proto`
//! and `relations.proto` (package `spark.connect`): a SQL relation to run,
//! and the Arrow batches that come back. Fields dpkit does not use are
//! skipped when decoding, as protobuf allows.

/// `spark.connect.ExecutePlanRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExecutePlanRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(message, optional, tag = "3")]
    pub plan: Option<Plan>,
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub request_options: Vec<RequestOption>,
    /// The operation's id, chosen by the client, so that it can be
    /// interrupted and reattached to by it.
    #[prost(string, optional, tag = "6")]
    pub operation_id: Option<String>,
}

/// `spark.connect.ExecutePlanRequest.RequestOption`, with its reattach options.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestOption {
    #[prost(message, optional, tag = "1")]
    pub reattach_options: Option<ReattachOptions>,
}

/// `spark.connect.ReattachOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReattachOptions {
    #[prost(bool, tag = "1")]
    pub reattachable: bool,
}

impl ExecutePlanRequest {
    /// Runs `query` in the session `session` as the operation `operation`.
    /// The execution is reattachable: its stream ends with `ResultComplete`
    /// when the result is whole, and the client reattaches to read on when
    /// the server ends a stream before that.
    pub(crate) fn sql(session: &str, operation: &str, query: &str) -> Self {
        Self {
            request_options: vec![RequestOption {
                reattach_options: Some(ReattachOptions { reattachable: true }),
            }],
            operation_id: Some(operation.to_string()),
            session_id: session.to_string(),
            user_context: Some(UserContext {
                user_id: "dpkit".into(),
            }),
            plan: Some(Plan {
                root: Some(Relation {
                    sql: Some(Sql {
                        query: query.to_string(),
                    }),
                }),
            }),
            client_type: Some("dpkit".into()),
        }
    }
}

/// `spark.connect.UserContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UserContext {
    #[prost(string, tag = "1")]
    pub user_id: String,
}

/// `spark.connect.Plan`, with its `root` relation (of the `op_type` oneof).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Plan {
    #[prost(message, optional, tag = "1")]
    pub root: Option<Relation>,
}

/// `spark.connect.Relation`, with its `sql` member (of the `rel_type` oneof).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Relation {
    #[prost(message, optional, tag = "10")]
    pub sql: Option<Sql>,
}

/// `spark.connect.SQL`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Sql {
    #[prost(string, tag = "1")]
    pub query: String,
}

/// `spark.connect.ExecutePlanResponse`: its Arrow batches, and the mark
/// that the result is complete.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExecutePlanResponse {
    #[prost(message, optional, tag = "2")]
    pub arrow_batch: Option<ArrowBatch>,
    /// The response's id, from which a reattached stream goes on.
    #[prost(string, tag = "13")]
    pub response_id: String,
    /// Sent last, once every batch was: a stream that ends without it
    /// is to be reattached to.
    #[prost(message, optional, tag = "14")]
    pub result_complete: Option<ResultComplete>,
}

/// `spark.connect.ExecutePlanResponse.ResultComplete` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResultComplete {}

/// `spark.connect.ReattachExecuteRequest`: the responses of an operation
/// after `last_response_id`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReattachExecuteRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, tag = "3")]
    pub operation_id: String,
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub last_response_id: Option<String>,
}

impl ReattachExecuteRequest {
    /// Reads on operation `operation` of `session` after `last`.
    pub(crate) fn after(session: &str, operation: &str, last: Option<String>) -> Self {
        Self {
            session_id: session.to_string(),
            user_context: Some(UserContext {
                user_id: "dpkit".into(),
            }),
            operation_id: operation.to_string(),
            client_type: Some("dpkit".into()),
            last_response_id: last,
        }
    }
}

/// `spark.connect.ReleaseExecuteRequest`, releasing all of an operation.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReleaseExecuteRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, tag = "3")]
    pub operation_id: String,
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
    #[prost(message, optional, tag = "5")]
    pub release_all: Option<ReleaseAll>,
}

impl ReleaseExecuteRequest {
    /// Releases everything the server keeps of `operation`.
    pub(crate) fn all(session: &str, operation: &str) -> Self {
        Self {
            session_id: session.to_string(),
            user_context: Some(UserContext {
                user_id: "dpkit".into(),
            }),
            operation_id: operation.to_string(),
            client_type: Some("dpkit".into()),
            release_all: Some(ReleaseAll {}),
        }
    }
}

/// `spark.connect.ReleaseExecuteRequest.ReleaseAll` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReleaseAll {}

/// `spark.connect.ReleaseExecuteResponse` (nothing of it is read).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReleaseExecuteResponse {}

/// `spark.connect.InterruptRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InterruptRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, optional, tag = "3")]
    pub client_type: Option<String>,
    /// `INTERRUPT_TYPE_OPERATION_ID` is 3.
    #[prost(int32, tag = "4")]
    pub interrupt_type: i32,
    #[prost(string, optional, tag = "6")]
    pub operation_id: Option<String>,
}

impl InterruptRequest {
    /// Interrupts the operation `operation` of the session `session`.
    pub(crate) fn operation(session: &str, operation: &str) -> Self {
        Self {
            session_id: session.to_string(),
            user_context: Some(UserContext {
                user_id: "dpkit".into(),
            }),
            client_type: Some("dpkit".into()),
            interrupt_type: 3,
            operation_id: Some(operation.to_string()),
        }
    }
}

/// `spark.connect.InterruptResponse`: the operations it interrupted.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InterruptResponse {
    #[prost(string, repeated, tag = "2")]
    pub interrupted_ids: Vec<String>,
}

/// `spark.connect.ExecutePlanResponse.ArrowBatch`: an Arrow IPC stream.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ArrowBatch {
    #[prost(int64, tag = "1")]
    pub row_count: i64,
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

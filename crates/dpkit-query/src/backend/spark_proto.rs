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
}

impl ExecutePlanRequest {
    /// Runs `query` in the session `session`.
    pub(crate) fn sql(session: &str, query: &str) -> Self {
        Self {
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

/// `spark.connect.ExecutePlanResponse`: only its Arrow batches are read.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExecutePlanResponse {
    #[prost(message, optional, tag = "2")]
    pub arrow_batch: Option<ArrowBatch>,
}

/// `spark.connect.ExecutePlanResponse.ArrowBatch`: an Arrow IPC stream.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ArrowBatch {
    #[prost(int64, tag = "1")]
    pub row_count: i64,
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

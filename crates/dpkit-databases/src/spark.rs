//! A table of an Apache Spark cluster, through its Spark Connect server:
//! the private plan goes as one SQL statement (`ExecutePlan` with a SQL
//! relation, over gRPC), and the per-group aggregates come back as Arrow.

use std::io::Cursor;
use std::sync::Mutex;
use std::time::Duration;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type, SchemaRef};
use datafusion::arrow::ipc::reader::StreamReader;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use super::flavour::Flavour;
use super::rows::{Cell, Rows, shape_error};
use super::spark_proto as proto;
use super::sql::RemotePlan;
use super::{Backend, DatabaseType};
use crate::error::{DatabaseError, Result};
use dpkit_description::ColumnKind;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const EXECUTE_PLAN: &str = "/spark.connect.SparkConnectService/ExecutePlan";
const INTERRUPT: &str = "/spark.connect.SparkConnectService/Interrupt";
const REATTACH_EXECUTE: &str = "/spark.connect.SparkConnectService/ReattachExecute";
const RELEASE_EXECUTE: &str = "/spark.connect.SparkConnectService/ReleaseExecute";
/// Streams of one operation read at most (each ends after at least one
/// response, as Spark sends them; its defaults end one after two minutes
/// or a gigabyte).
const MAX_REATTACHES: usize = 100_000;
/// How long asking the cluster to stop a timed-out operation may take.
const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Spark table.
pub(crate) struct SparkTable {
    runtime: tokio::runtime::Runtime,
    channel: Channel,
    /// One Spark session per engine (a UUID, as Spark requires).
    session: String,
    table: String,
    /// Spark sessions are not for concurrent plans: one at a time.
    running: Mutex<()>,
}

/// A failure that does not depend on the rows: the server cannot be
/// reached, or went away. Refunded.
fn unreachable_error(reason: &str) -> DatabaseError {
    DatabaseError::Unreadable(format!("Spark {reason} (an I/O failure)"))
}

/// A random UUID (version 4) from the operating system's generator.
fn session_id() -> Result<String> {
    use rand_core::Rng;
    let mut bytes = [0u8; 16];
    dpkit_core::rng::SecureRng::from_os()
        .map_err(|e| DatabaseError::Unreadable(format!("cannot start a Spark session: {e}")))?
        .fill_bytes(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// `sc://host:port` as the HTTP/2 address gRPC uses.
fn endpoint(address: &str) -> Result<Endpoint> {
    let invalid = || {
        DatabaseError::Description(
            "the spark address must be sc://host:port (Spark Connect)".into(),
        )
    };
    let rest = address.strip_prefix("sc://").ok_or_else(invalid)?;
    let host_port = rest.split(['/', ';']).next().unwrap_or_default();
    let (host, port) = host_port.rsplit_once(':').ok_or_else(invalid)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(invalid());
    }
    Endpoint::from_shared(format!("http://{host}:{port}"))
        .map(|e| e.connect_timeout(CONNECT_TIMEOUT))
        .map_err(|_| invalid())
}

impl SparkTable {
    /// Connects to the Spark Connect server at `address` for `table`.
    pub(crate) fn open(address: &str, table: &str) -> Result<Self> {
        let endpoint = endpoint(address)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| {
                DatabaseError::Unreadable(format!("cannot start the Spark client: {e}"))
            })?;
        let channel = runtime
            .block_on(endpoint.connect())
            .map_err(|_| unreachable_error("cannot be reached"))?;
        Ok(Self {
            runtime,
            channel,
            session: session_id()?,
            table: table.to_string(),
            running: Mutex::new(()),
        })
    }

    /// Runs `sql` and collects its Arrow batches. Past `timeout` the
    /// operation is interrupted on the cluster, not only abandoned here.
    fn execute(
        &self,
        sql: &str,
        timeout: Option<Duration>,
    ) -> std::result::Result<Vec<RecordBatch>, tonic::Status> {
        let _one_at_a_time = self.running.lock();
        let operation = session_id().map_err(|e| tonic::Status::internal(e.to_string()))?;
        let request = proto::ExecutePlanRequest::sql(&self.session, &operation, sql);
        let work = self.stream(request, &operation);
        let outcome = self.runtime.block_on(async {
            let Some(limit) = timeout else {
                return work.await;
            };
            match tokio::time::timeout(limit, work).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.interrupt(&operation).await;
                    Err(tonic::Status::deadline_exceeded("time limit"))
                }
            }
        });
        // Outside the time limit: a result already whole cannot run out of
        // time while the server is told it may drop it.
        if outcome.is_ok() {
            self.runtime.block_on(self.release(&operation));
        }
        outcome
    }

    /// The batches of one operation, checked complete: a reattachable
    /// execution's result is whole only once Spark sends `ResultComplete`;
    /// a stream that ends before it (Spark ends them after a while, or
    /// past a size) is reattached to from its last response, and a batch
    /// whose row count is not what it says is refused. A partial result is
    /// never read as a smaller answer.
    async fn stream(
        &self,
        request: proto::ExecutePlanRequest,
        operation: &str,
    ) -> std::result::Result<Vec<RecordBatch>, tonic::Status> {
        let mut responses = self.responses(EXECUTE_PLAN, request).await?;
        let mut batches = Vec::new();
        let mut last: Option<String> = None;
        for _ in 0..MAX_REATTACHES {
            while let Some(response) = responses.message().await? {
                if let Some(arrow) = response.arrow_batch {
                    let decoded = decode(&arrow.data)?;
                    let rows: usize = decoded.iter().map(RecordBatch::num_rows).sum();
                    if i64::try_from(rows).ok() != Some(arrow.row_count) {
                        return Err(incomplete());
                    }
                    batches.extend(decoded);
                }
                if response.result_complete.is_some() {
                    return Ok(batches);
                }
                if !response.response_id.is_empty() {
                    last = Some(response.response_id);
                }
            }
            let again =
                proto::ReattachExecuteRequest::after(&self.session, operation, last.clone());
            responses = self.responses(REATTACH_EXECUTE, again).await?;
        }
        Err(incomplete())
    }

    /// A stream of `ExecutePlanResponse`s from the server-streaming method
    /// at `path`. No limit of its own on a response's size: tonic's
    /// default of 4 MiB would fail a quantile's list of cells once a group
    /// has about a million rows, a threshold one row can cross.
    async fn responses<Q: prost::Message + Send + Sync + 'static>(
        &self,
        path: &'static str,
        request: Q,
    ) -> std::result::Result<tonic::Streaming<proto::ExecutePlanResponse>, tonic::Status> {
        let mut client =
            tonic::client::Grpc::new(self.channel.clone()).max_decoding_message_size(usize::MAX);
        client
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        Ok(client
            .server_streaming(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::<Q, proto::ExecutePlanResponse>::default(),
            )
            .await?
            .into_inner())
    }

    /// Tells the server it may drop what it keeps of `operation` for
    /// reattaching (best effort: it drops it after a while anyway).
    async fn release(&self, operation: &str) {
        let request = proto::ReleaseExecuteRequest::all(&self.session, operation);
        self.ask::<_, proto::ReleaseExecuteResponse>(RELEASE_EXECUTE, request)
            .await;
    }

    /// Interrupts `operation` on the cluster (at most a few seconds spent
    /// asking; a server that does not answer has stopped it anyway).
    async fn interrupt(&self, operation: &str) {
        let request = proto::InterruptRequest::operation(&self.session, operation);
        self.ask::<_, proto::InterruptResponse>(INTERRUPT, request)
            .await;
    }

    /// Sends `request` to the unary method at `path`, best effort: within
    /// `INTERRUPT_TIMEOUT`, and its answer or failure ignored.
    async fn ask<Q, R>(&self, path: &'static str, request: Q)
    where
        Q: prost::Message + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        let ask = async {
            let mut client = tonic::client::Grpc::new(self.channel.clone());
            client.ready().await.ok()?;
            client
                .unary(
                    tonic::Request::new(request),
                    PathAndQuery::from_static(path),
                    tonic_prost::ProstCodec::<Q, R>::default(),
                )
                .await
                .ok()
        };
        let _ = tokio::time::timeout(INTERRUPT_TIMEOUT, ask).await;
    }
}

/// A result stream that ended before its end (its cost is kept, as for
/// every failure of a query sent, see `run_error`).
fn incomplete() -> tonic::Status {
    tonic::Status::internal("the result stream ended before its end")
}

/// One Arrow IPC stream's batches.
fn decode(data: &[u8]) -> std::result::Result<Vec<RecordBatch>, tonic::Status> {
    let malformed = |_| tonic::Status::internal("malformed Arrow batch");
    StreamReader::try_new(Cursor::new(data), None)
        .map_err(malformed)?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(malformed)
}

/// A Spark type name as dpkit reads it.
fn database_type(name: &str) -> DatabaseType {
    match name {
        "tinyint" | "smallint" | "int" | "bigint" => DatabaseType::Integer,
        "float" | "double" => DatabaseType::Real,
        "string" => DatabaseType::Text,
        other if other.starts_with("varchar") || other.starts_with("char") => DatabaseType::Text,
        other => DatabaseType::Other(other.to_string()),
    }
}

/// A failure of a query sent to the cluster. Its cost is kept, and its
/// details are withheld. Even a server that goes away (or a stream cut
/// and not reattached) is charged: the query may have reached the cluster,
/// whose driver or executors could have failed on one person's row, and a
/// refund would give that bit away for free. A server that cannot be
/// reached is refused, free, at planning (`check`).
fn run_error(status: &tonic::Status) -> DatabaseError {
    let transport = std::error::Error::source(status).is_some();
    let gone = matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::DataLoss
    );
    let reason = match status.code() {
        _ if gone || transport => {
            "Spark went away while running it, which one row could have caused"
        }
        tonic::Code::DeadlineExceeded => "it ran longer than the time limit",
        _ => "details withheld: they could quote private values",
    };
    DatabaseError::FailedWhileRunning(reason.into())
}

impl Backend for SparkTable {
    fn flavour(&self) -> Flavour {
        Flavour::Spark
    }

    fn identity(&self) -> Result<String> {
        // Spark finds names whatever their case; a table of one name in
        // two databases is taken for one (refusing more, never less).
        let name = self.table.rsplit('.').next().unwrap_or_default();
        Ok(name.to_lowercase())
    }

    fn columns(&self) -> Result<Vec<(String, DatabaseType)>> {
        let sql = format!("DESCRIBE TABLE {}", Flavour::Spark.qualified(&self.table));
        let batches = self
            .execute(&sql, None)
            .map_err(|status| match status.code() {
                tonic::Code::Unavailable => unreachable_error("cannot be reached"),
                _ => DatabaseError::Description(format!(
                    "Spark has no table '{}' (or cannot describe it)",
                    self.table
                )),
            })?;
        let mut columns = Vec::new();
        for batch in &batches {
            let names = text_column(batch, 0)?;
            let types = text_column(batch, 1)?;
            for (name, kind) in names.into_iter().zip(types) {
                // Partition and detail sections follow an empty or `#` row.
                if name.is_empty() || name.starts_with('#') {
                    return Ok(columns);
                }
                columns.push((name, database_type(&kind)));
            }
        }
        Ok(columns)
    }

    fn source(
        &self,
        columns: &[(String, ColumnKind)],
        _: &[(String, DatabaseType)],
        _: &[(String, u32)],
    ) -> String {
        Flavour::Spark.cast_source(&self.table, columns)
    }

    fn check(&self, plan: &RemotePlan, schema: &SchemaRef) -> Result<()> {
        let explained = self
            .execute(&format!("EXPLAIN {}", plan.sql), None)
            .map_err(|status| match status.code() {
                tonic::Code::Unavailable | tonic::Code::Cancelled => {
                    unreachable_error("cannot be reached")
                }
                _ => super::cannot_run(Flavour::Spark, status.message()),
            })?;
        // Spark explains a plan it cannot analyse in its answer's rows.
        let text: Vec<String> = explained
            .iter()
            .map(|batch| text_column(batch, 0))
            .collect::<Result<Vec<_>>>()?
            .concat();
        if let Some(first) = text.first()
            && first.starts_with("Error occurred")
        {
            return Err(super::cannot_run(
                Flavour::Spark,
                text.get(1).map_or("", String::as_str),
            ));
        }
        let described = self
            .execute(&format!("DESCRIBE QUERY {}", plan.sql), None)
            .map_err(|status| match status.code() {
                tonic::Code::Unavailable | tonic::Code::Cancelled => {
                    unreachable_error("cannot be reached")
                }
                _ => super::cannot_run(Flavour::Spark, status.message()),
            })?;
        let mut types = Vec::new();
        for batch in &described {
            types.extend(
                text_column(batch, 0)?
                    .into_iter()
                    .zip(text_column(batch, 1)?),
            );
        }
        super::check_result_types(Flavour::Spark, schema, &types, reads_as)
    }

    fn run(
        &self,
        plan: &RemotePlan,
        schema: SchemaRef,
        timeout: Option<Duration>,
    ) -> Result<RecordBatch> {
        let batches = self
            .execute(&plan.sql, timeout)
            .map_err(|status| run_error(&status))?;
        let mut rows = Rows::new(schema)?;
        for batch in &batches {
            let names = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>();
            let order = rows.order(names.iter().map(String::as_str))?;
            for (i, &target) in order.iter().enumerate() {
                let array = batch.column(i);
                for row in 0..batch.num_rows() {
                    rows.push(target, cell(array, row)?)?;
                }
            }
        }
        rows.finish()
    }
}

/// Whether a result column Spark types `found` is read as `wanted` (see
/// `cell`: exact sums come as whole decimals, quantile cells as text).
fn reads_as(wanted: &DataType, found: &str) -> bool {
    match wanted {
        DataType::Int64 => matches!(found, "bigint" | "int" | "smallint" | "tinyint"),
        DataType::Float64 => found == "double",
        DataType::Utf8 | DataType::List(_) => found == "string",
        DataType::Decimal128(_, 0) => found.starts_with("decimal(") && found.ends_with(",0)"),
        DataType::Boolean => found == "boolean",
        // A key that is NULL in every row.
        DataType::Null => true,
        _ => false,
    }
}

/// Column `index` of a batch as text.
fn text_column(batch: &RecordBatch, index: usize) -> Result<Vec<String>> {
    let array = cast(batch.column(index), &DataType::Utf8).map_err(|_| shape_error())?;
    let text = array.as_string::<i32>();
    Ok((0..text.len())
        .map(|i| {
            if text.is_null(i) {
                String::new()
            } else {
                text.value(i).trim().to_string()
            }
        })
        .collect())
}

/// One value of a result column.
fn cell(array: &ArrayRef, row: usize) -> Result<Cell<'_>> {
    if array.is_null(row) {
        return Ok(Cell::Null);
    }
    Ok(match array.data_type() {
        t if t.is_integer() => Cell::Integer(
            cast(&array.slice(row, 1), &DataType::Int64)
                .map_err(|_| shape_error())?
                .as_primitive::<Int64Type>()
                .value(0),
        ),
        // An exact sum's whole steps (see spelling::exact_sum).
        DataType::Decimal128(_, 0) => Cell::Wide(array.as_primitive::<Decimal128Type>().value(row)),
        t if t.is_floating() || matches!(t, DataType::Decimal128(..)) => Cell::Real(
            cast(&array.slice(row, 1), &DataType::Float64)
                .map_err(|_| shape_error())?
                .as_primitive::<Float64Type>()
                .value(0),
        ),
        // A key Spark types as NULL (`CASE … THEN NULL END`) has only NULLs.
        DataType::Null => Cell::Null,
        DataType::Boolean => Cell::Integer(i64::from(array.as_boolean().value(row))),
        DataType::Utf8 => Cell::Text(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Cell::Text(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Cell::Text(array.as_string_view().value(row)),
        _ => return Err(shape_error()),
    })
}

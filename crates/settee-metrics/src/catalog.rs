//! CouchDB 3.5's node statistics as `GET /_node/{node}/_stats` lists them: every metric's
//! path, kind and description, so that dashboards and alerts written for CouchDB find the
//! names they expect. Settee updates those that have a meaning here (see
//! docs/COMPATIBILITY.md); the others (cluster internals, search services) stay at zero, as
//! they would on a CouchDB node that never does that work.

use crate::Kind;

/// One metric: where it sits in `_stats`, its kind and CouchDB's description of it.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    /// Its path in `_stats`, parts separated by `/`.
    pub path: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// What it counts, as CouchDB says.
    pub desc: &'static str,
}

/// Declares the metrics: the [`Metric`] names, in the order of [`DEFS`].
macro_rules! catalog {
    ($($name:ident: $kind:ident $path:literal $desc:literal;)*) => {
        /// A metric of the catalog; its number is its place in [`DEFS`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Metric {
            $(
                #[doc = $desc]
                $name,
            )*
        }

        /// Every metric's definition, by path.
        pub const DEFS: &[Def] = &[$(Def { path: $path, kind: Kind::$kind, desc: $desc },)*];

        /// Every metric, in the order of [`DEFS`].
        pub(crate) const ALL: &[Metric] = &[$(Metric::$name,)*];
    };
}

catalog! {
    CouchLogLevelAlert: Counter "couch_log/level/alert" "number of logged alert messages";
    CouchLogLevelCritical: Counter "couch_log/level/critical" "number of logged critical messages";
    CouchLogLevelDebug: Counter "couch_log/level/debug" "number of logged debug messages";
    CouchLogLevelEmergency: Counter "couch_log/level/emergency" "number of logged emergency messages";
    CouchLogLevelError: Counter "couch_log/level/error" "number of logged error messages";
    CouchLogLevelInfo: Counter "couch_log/level/info" "number of logged info messages";
    CouchLogLevelNotice: Counter "couch_log/level/notice" "number of logged notice messages";
    CouchLogLevelReport: Counter "couch_log/level/report" "number of logged report messages";
    CouchLogLevelReportError: Counter "couch_log/level/report_error" "number of failed report messages";
    CouchLogLevelWarning: Counter "couch_log/level/warning" "number of logged warning messages";
    CouchReplicatorChangesManagerDeaths: Counter "couch_replicator/changes_manager_deaths" "number of failed replicator changes managers";
    CouchReplicatorChangesQueueDeaths: Counter "couch_replicator/changes_queue_deaths" "number of failed replicator changes work queues";
    CouchReplicatorChangesReadFailures: Counter "couch_replicator/changes_read_failures" "number of failed replicator changes read failures";
    CouchReplicatorChangesReaderDeaths: Counter "couch_replicator/changes_reader_deaths" "number of failed replicator changes readers";
    CouchReplicatorCheckpointsFailure: Counter "couch_replicator/checkpoints/failure" "number of failed checkpoint saves";
    CouchReplicatorCheckpointsSuccess: Counter "couch_replicator/checkpoints/success" "number of checkpoints successfully saves";
    CouchReplicatorConnectionAcquires: Counter "couch_replicator/connection/acquires" "number of times connections are shared";
    CouchReplicatorConnectionCloses: Counter "couch_replicator/connection/closes" "number of times a worker is gracefully shut down";
    CouchReplicatorConnectionCreates: Counter "couch_replicator/connection/creates" "number of connections created";
    CouchReplicatorConnectionOwnerCrashes: Counter "couch_replicator/connection/owner_crashes" "number of times a connection owner crashes while owning at least one connection";
    CouchReplicatorConnectionReleases: Counter "couch_replicator/connection/releases" "number of times ownership of a connection is released";
    CouchReplicatorConnectionWorkerCrashes: Counter "couch_replicator/connection/worker_crashes" "number of times a worker unexpectedly terminates";
    CouchReplicatorDbScans: Counter "couch_replicator/db_scans" "number of times replicator db scans have been started";
    CouchReplicatorDocsCompletedStateUpdates: Counter "couch_replicator/docs/completed_state_updates" "number of 'completed' state document updates";
    CouchReplicatorDocsDbChanges: Counter "couch_replicator/docs/db_changes" "number of db changes processed by replicator doc processor";
    CouchReplicatorDocsDbsDeleted: Counter "couch_replicator/docs/dbs_deleted" "number of db shard deletions seen by replicator doc processor";
    CouchReplicatorDocsDbsFound: Counter "couch_replicator/docs/dbs_found" "number of db shard found by replicator doc processor";
    CouchReplicatorDocsFailedStateUpdates: Counter "couch_replicator/docs/failed_state_updates" "number of 'failed' state document updates";
    CouchReplicatorFailedStarts: Counter "couch_replicator/failed_starts" "number of replications that have failed to start";
    CouchReplicatorJobsAdds: Counter "couch_replicator/jobs/adds" "number of jobs added to replicator scheduler";
    CouchReplicatorJobsCrashed: Gauge "couch_replicator/jobs/crashed" "replicator scheduler crashed jobs";
    CouchReplicatorJobsCrashes: Counter "couch_replicator/jobs/crashes" "number of job crashed noticed by replicator scheduler";
    CouchReplicatorJobsDuplicateAdds: Counter "couch_replicator/jobs/duplicate_adds" "number of duplicate jobs added to replicator scheduler";
    CouchReplicatorJobsPending: Gauge "couch_replicator/jobs/pending" "replicator scheduler pending jobs";
    CouchReplicatorJobsRemoves: Counter "couch_replicator/jobs/removes" "number of jobs removed from replicator scheduler";
    CouchReplicatorJobsRunning: Gauge "couch_replicator/jobs/running" "replicator scheduler running jobs";
    CouchReplicatorJobsStarts: Counter "couch_replicator/jobs/starts" "number of jobs started by replicator scheduler";
    CouchReplicatorJobsStops: Counter "couch_replicator/jobs/stops" "number of jobs stopped by replicator scheduler";
    CouchReplicatorJobsTotal: Gauge "couch_replicator/jobs/total" "total number of replicator scheduler jobs";
    CouchReplicatorRequests: Counter "couch_replicator/requests" "number of HTTP requests made by the replicator";
    CouchReplicatorResponsesFailure: Counter "couch_replicator/responses/failure" "number of failed HTTP responses received by the replicator";
    CouchReplicatorResponsesSuccess: Counter "couch_replicator/responses/success" "number of successful HTTP responses received by the replicator";
    CouchReplicatorStreamResponsesFailure: Counter "couch_replicator/stream_responses/failure" "number of failed streaming HTTP responses received by the replicator";
    CouchReplicatorStreamResponsesSuccess: Counter "couch_replicator/stream_responses/success" "number of successful streaming HTTP responses received by the replicator";
    CouchReplicatorWorkerDeaths: Counter "couch_replicator/worker_deaths" "number of failed replicator workers";
    CouchReplicatorWorkersStarted: Counter "couch_replicator/workers_started" "number of replicator workers started";
    AuthCacheHits: Counter "couchdb/auth_cache_hits" "number of authentication cache hits";
    AuthCacheMisses: Counter "couchdb/auth_cache_misses" "number of authentication cache misses";
    CoalescedUpdatesInteractive: Counter "couchdb/coalesced_updates/interactive" "number of coalesced interactive updates";
    CoalescedUpdatesReplicated: Counter "couchdb/coalesced_updates/replicated" "number of coalesced replicated updates";
    CollectResultsTime: Histogram "couchdb/collect_results_time" "microsecond latency for calls to couch_db:collect_results/3";
    Commits: Counter "couchdb/commits" "number of commits performed";
    CouchServerLruSkip: Counter "couchdb/couch_server/lru_skip" "number of couch_server LRU operations skipped";
    DatabasePurges: Counter "couchdb/database_purges" "number of times a database was purged";
    DatabaseReads: Counter "couchdb/database_reads" "number of times a document was read from a database";
    DatabaseWrites: Counter "couchdb/database_writes" "number of times a database was changed";
    DbOpenTime: Histogram "couchdb/db_open_time" "milliseconds required to open a database";
    Dbinfo: Histogram "couchdb/dbinfo" "distribution of latencies for calls to retrieve DB info";
    DocumentInserts: Counter "couchdb/document_inserts" "number of documents inserted";
    DocumentPurgesFailure: Counter "couchdb/document_purges/failure" "number of failed document purge operations";
    DocumentPurgesSuccess: Counter "couchdb/document_purges/success" "number of successful document purge operations";
    DocumentPurgesTotal: Counter "couchdb/document_purges/total" "number of total document purge operations";
    DocumentWrites: Counter "couchdb/document_writes" "number of document write operations";
    HttpdAbandonedStreamingRequests: Counter "couchdb/httpd/abandoned_streaming_requests" "number of abandoned streaming requests";
    HttpdAbortedRequests: Counter "couchdb/httpd/aborted_requests" "number of aborted requests";
    HttpdAllDocsTimeouts: Counter "couchdb/httpd/all_docs_timeouts" "number of HTTP all_docs timeouts";
    HttpdBulkDocs: Histogram "couchdb/httpd/bulk_docs" "distribution of the number of docs in _bulk_docs requests";
    HttpdBulkRequests: Counter "couchdb/httpd/bulk_requests" "number of bulk requests";
    HttpdClientsRequestingChanges: Counter "couchdb/httpd/clients_requesting_changes" "number of clients for continuous _changes";
    HttpdExplainTimeouts: Counter "couchdb/httpd/explain_timeouts" "number of HTTP _explain timeouts";
    HttpdFindTimeouts: Counter "couchdb/httpd/find_timeouts" "number of HTTP find timeouts";
    HttpdPartitionAllDocsRequests: Counter "couchdb/httpd/partition_all_docs_requests" "number of partition HTTP _all_docs requests";
    HttpdPartitionAllDocsTimeouts: Counter "couchdb/httpd/partition_all_docs_timeouts" "number of partition HTTP all_docs timeouts";
    HttpdPartitionExplainRequests: Counter "couchdb/httpd/partition_explain_requests" "number of partition HTTP _explain requests";
    HttpdPartitionExplainTimeouts: Counter "couchdb/httpd/partition_explain_timeouts" "number of partition HTTP _explain timeouts";
    HttpdPartitionFindRequests: Counter "couchdb/httpd/partition_find_requests" "number of partition HTTP _find requests";
    HttpdPartitionFindTimeouts: Counter "couchdb/httpd/partition_find_timeouts" "number of partition HTTP find timeouts";
    HttpdPartitionViewRequests: Counter "couchdb/httpd/partition_view_requests" "number of partition HTTP view requests";
    HttpdPartitionViewTimeouts: Counter "couchdb/httpd/partition_view_timeouts" "number of partition HTTP view timeouts";
    HttpdPurgeRequests: Counter "couchdb/httpd/purge_requests" "number of purge requests";
    HttpdRequests: Counter "couchdb/httpd/requests" "number of HTTP requests";
    HttpdTemporaryViewReads: Counter "couchdb/httpd/temporary_view_reads" "number of temporary view reads";
    HttpdViewReads: Counter "couchdb/httpd/view_reads" "number of view reads";
    HttpdViewTimeouts: Counter "couchdb/httpd/view_timeouts" "number of HTTP view timeouts";
    MethodCopy: Counter "couchdb/httpd_request_methods/COPY" "number of HTTP COPY requests";
    MethodDelete: Counter "couchdb/httpd_request_methods/DELETE" "number of HTTP DELETE requests";
    MethodGet: Counter "couchdb/httpd_request_methods/GET" "number of HTTP GET requests";
    MethodHead: Counter "couchdb/httpd_request_methods/HEAD" "number of HTTP HEAD requests";
    MethodOptions: Counter "couchdb/httpd_request_methods/OPTIONS" "number of HTTP OPTIONS requests";
    MethodPost: Counter "couchdb/httpd_request_methods/POST" "number of HTTP POST requests";
    MethodPut: Counter "couchdb/httpd_request_methods/PUT" "number of HTTP PUT requests";
    Status200: Counter "couchdb/httpd_status_codes/200" "number of HTTP 200 OK responses";
    Status201: Counter "couchdb/httpd_status_codes/201" "number of HTTP 201 Created responses";
    Status202: Counter "couchdb/httpd_status_codes/202" "number of HTTP 202 Accepted responses";
    Status204: Counter "couchdb/httpd_status_codes/204" "number of HTTP 204 No Content responses";
    Status206: Counter "couchdb/httpd_status_codes/206" "number of HTTP 206 Partial Content";
    Status301: Counter "couchdb/httpd_status_codes/301" "number of HTTP 301 Moved Permanently responses";
    Status302: Counter "couchdb/httpd_status_codes/302" "number of HTTP 302 Found responses";
    Status304: Counter "couchdb/httpd_status_codes/304" "number of HTTP 304 Not Modified responses";
    Status400: Counter "couchdb/httpd_status_codes/400" "number of HTTP 400 Bad Request responses";
    Status401: Counter "couchdb/httpd_status_codes/401" "number of HTTP 401 Unauthorized responses";
    Status403: Counter "couchdb/httpd_status_codes/403" "number of HTTP 403 Forbidden responses";
    Status404: Counter "couchdb/httpd_status_codes/404" "number of HTTP 404 Not Found responses";
    Status405: Counter "couchdb/httpd_status_codes/405" "number of HTTP 405 Method Not Allowed responses";
    Status406: Counter "couchdb/httpd_status_codes/406" "number of HTTP 406 Not Acceptable responses";
    Status409: Counter "couchdb/httpd_status_codes/409" "number of HTTP 409 Conflict responses";
    Status412: Counter "couchdb/httpd_status_codes/412" "number of HTTP 412 Precondition Failed responses";
    Status413: Counter "couchdb/httpd_status_codes/413" "number of HTTP 413 Request Entity Too Long responses";
    Status414: Counter "couchdb/httpd_status_codes/414" "number of HTTP 414 Request URI Too Long responses";
    Status415: Counter "couchdb/httpd_status_codes/415" "number of HTTP 415 Unsupported Media Type responses";
    Status416: Counter "couchdb/httpd_status_codes/416" "number of HTTP 416 Requested Range Not Satisfiable responses";
    Status417: Counter "couchdb/httpd_status_codes/417" "number of HTTP 417 Expectation Failed responses";
    Status500: Counter "couchdb/httpd_status_codes/500" "number of HTTP 500 Internal Server Error responses";
    Status501: Counter "couchdb/httpd_status_codes/501" "number of HTTP 501 Not Implemented responses";
    Status503: Counter "couchdb/httpd_status_codes/503" "number of HTTP 503 Service unavailable responses";
    Status507: Counter "couchdb/httpd_status_codes/507" "number of HTTP 507 Insufficient Storage responses";
    IoQueueSearch: Counter "couchdb/io_queue/search" "Search IO directly triggered by client requests";
    IoQueue2SearchCount: Counter "couchdb/io_queue2/search/count" "Search IO directly triggered by client requests";
    LegacyChecksums: Counter "couchdb/legacy_checksums" "number of legacy checksums found in couch_file instances";
    LocalDocumentWrites: Counter "couchdb/local_document_writes" "number of _local document write operations";
    MrviewEmits: Counter "couchdb/mrview/emits" "number of invocations of `emit' in map functions in the view server";
    MrviewMapDoc: Counter "couchdb/mrview/map_doc" "number of documents mapped in the view server";
    OpenDatabases: Counter "couchdb/open_databases" "number of open databases";
    OpenOsFiles: Counter "couchdb/open_os_files" "number of file descriptors CouchDB has open";
    PasswordHashingFast: Counter "couchdb/password_hashing_fast" "number of fast password hashing operations";
    PasswordHashingSlow: Counter "couchdb/password_hashing_slow" "number of slow password hashing operations";
    QueryServerAcquiredProcesses: Counter "couchdb/query_server/acquired_processes" "number of acquired external processes";
    QueryServerCallsAddFun: Counter "couchdb/query_server/calls/add_fun" "number of add_fun requests";
    QueryServerCallsDdocFilter: Counter "couchdb/query_server/calls/ddoc_filter" "number of filter requests";
    QueryServerCallsDdocNew: Counter "couchdb/query_server/calls/ddoc_new" "number of ddoc new requests";
    QueryServerCallsDdocOther: Counter "couchdb/query_server/calls/ddoc_other" "number of other ddoc requests";
    QueryServerCallsDdocVdu: Counter "couchdb/query_server/calls/ddoc_vdu" "number of vdu requests";
    QueryServerCallsMap: Counter "couchdb/query_server/calls/map" "number of map_doc requests";
    QueryServerCallsOther: Counter "couchdb/query_server/calls/other" "number of other requests";
    QueryServerCallsReduce: Counter "couchdb/query_server/calls/reduce" "number of reduce requests";
    QueryServerCallsReset: Counter "couchdb/query_server/calls/reset" "number of reset requests";
    QueryServerCallsSpawnProc: Counter "couchdb/query_server/calls/spawn_proc" "number of spawned query processes";
    QueryServerProcessErrorExits: Counter "couchdb/query_server/process_error_exits" "number of error OS process exits";
    QueryServerProcessErrors: Counter "couchdb/query_server/process_errors" "number of OS process errors";
    QueryServerProcessExits: Counter "couchdb/query_server/process_exits" "number of normal OS process exits";
    QueryServerProcessPrompts: Counter "couchdb/query_server/process_prompts" "number of successful OS process prompts";
    QueryServerProcessStarts: Counter "couchdb/query_server/process_starts" "number of OS process starts";
    QueryServerTimeAddFun: Counter "couchdb/query_server/time/add_fun" "accumulated number of microseconds spent processing add_fun requests";
    QueryServerTimeDdocFilter: Counter "couchdb/query_server/time/ddoc_filter" "accumulated number of microseconds spent processing filter requests";
    QueryServerTimeDdocNew: Counter "couchdb/query_server/time/ddoc_new" "accumulated number of microseconds spent processing ddoc new requests";
    QueryServerTimeDdocOther: Counter "couchdb/query_server/time/ddoc_other" "accumulated number of microseconds spent processing other ddoc requests";
    QueryServerTimeDdocVdu: Counter "couchdb/query_server/time/ddoc_vdu" "accumulated number of microseconds spent processing vdu requests";
    QueryServerTimeMap: Counter "couchdb/query_server/time/map" "accumulated number of microseconds spent processing map_doc requests";
    QueryServerTimeOther: Counter "couchdb/query_server/time/other" "accumulated number of microseconds spent processing other requests";
    QueryServerTimeReduce: Counter "couchdb/query_server/time/reduce" "accumulated number of microseconds spent processing reduce requests";
    QueryServerTimeReset: Counter "couchdb/query_server/time/reset" "accumulated number of microseconds spent processing reset requests";
    QueryServerTimeSpawnProc: Counter "couchdb/query_server/time/spawn_proc" "accumulated number of microseconds spent spawning os query processes";
    QueryServerVduProcessTime: Histogram "couchdb/query_server/vdu_process_time" "duration of validate_doc_update function calls";
    QueryServerVduRejects: Counter "couchdb/query_server/vdu_rejects" "number of rejections by validate_doc_update function";
    RequestTime: Histogram "couchdb/request_time" "length of a request inside CouchDB without MochiWeb";
    DdocCacheHit: Counter "ddoc_cache/hit" "number of design doc cache hits";
    DdocCacheMiss: Counter "ddoc_cache/miss" "number of design doc cache misses";
    DdocCacheRecovery: Counter "ddoc_cache/recovery" "number of design doc cache recoveries";
    DreyfusHttpdSearch: Histogram "dreyfus/httpd/search" "Distribution of overall search request latency as experienced by the end user";
    DreyfusIndexAwait: Histogram "dreyfus/index/await" "length of an dreyfus_index await request";
    DreyfusIndexGroup1: Histogram "dreyfus/index/group1" "length of an dreyfus_index group1 request";
    DreyfusIndexGroup2: Histogram "dreyfus/index/group2" "length of an dreyfus_index group2 request";
    DreyfusIndexInfo: Histogram "dreyfus/index/info" "length of an dreyfus_index info request";
    DreyfusIndexSearch: Histogram "dreyfus/index/search" "length of an dreyfus_index search request";
    DreyfusRpcGroup1: Histogram "dreyfus/rpc/group1" "length of a group1 RPC worker";
    DreyfusRpcGroup2: Histogram "dreyfus/rpc/group2" "length of a group2 RPC worker";
    DreyfusRpcInfo: Histogram "dreyfus/rpc/info" "length of an info RPC worker";
    DreyfusRpcSearch: Histogram "dreyfus/rpc/search" "length of a search RPC worker";
    FabricDocUpdateErrors: Counter "fabric/doc_update/errors" "number of document update errors";
    FabricDocUpdateMismatchedErrors: Counter "fabric/doc_update/mismatched_errors" "number of document update errors with multiple error types";
    FabricDocUpdateWriteQuorumErrors: Counter "fabric/doc_update/write_quorum_errors" "number of write quorum errors";
    FabricOpenShardTimeouts: Counter "fabric/open_shard/timeouts" "number of open shard timeouts";
    FabricReadRepairsFailure: Counter "fabric/read_repairs/failure" "number of failed read repair operations";
    FabricReadRepairsSuccess: Counter "fabric/read_repairs/success" "number of successful read repair operations";
    FabricWorkerTimeouts: Counter "fabric/worker/timeouts" "number of worker timeouts";
    FsyncCount: Counter "fsync/count" "number of fsync calls";
    FsyncTime: Histogram "fsync/time" "microseconds to call fsync";
    GlobalChangesDbWrites: Counter "global_changes/db_writes" "number of db writes performed by global changes";
    GlobalChangesEventDocConflict: Counter "global_changes/event_doc_conflict" "number of conflicted event docs encountered by global changes";
    GlobalChangesListenerPendingUpdates: Gauge "global_changes/listener_pending_updates" "number of global changes updates pending writes in global_changes_listener";
    GlobalChangesRpcs: Counter "global_changes/rpcs" "number of rpc operations performed by global_changes";
    GlobalChangesServerPendingUpdates: Gauge "global_changes/server_pending_updates" "number of global changes updates pending writes in global_changes_server";
    MangoDocsExamined: Counter "mango/docs_examined" "number of documents examined by mango queries coordinated by this node";
    MangoEvaluateSelector: Counter "mango/evaluate_selector" "number of mango selector evaluations";
    MangoKeysExamined: Counter "mango/keys_examined" "number of keys examined by mango queries coordinated by this node";
    MangoQueryInvalidIndex: Counter "mango/query_invalid_index" "number of mango queries that generated an invalid index warning";
    MangoQueryTime: Histogram "mango/query_time" "length of time processing a mango query";
    MangoQuorumDocsExamined: Counter "mango/quorum_docs_examined" "number of documents examined by mango queries, using cluster quorum";
    MangoResultsReturned: Counter "mango/results_returned" "number of rows returned by mango queries";
    MangoTooManyDocsScanned: Counter "mango/too_many_docs_scanned" "number of mango queries that generated an index scan warning";
    MangoUnindexedQueries: Counter "mango/unindexed_queries" "number of mango queries that could not use an index";
    Mem3ShardCacheEviction: Counter "mem3/shard_cache/eviction" "number of shard cache evictions";
    Mem3ShardCacheHit: Counter "mem3/shard_cache/hit" "number of shard cache hits";
    Mem3ShardCacheMiss: Counter "mem3/shard_cache/miss" "number of shard cache misses";
    NouveauActiveSearches: Counter "nouveau/active_searches" "number of active search requests";
    NouveauConnectionClosedErrors: Counter "nouveau/connection_closed_errors" "number of times we've retried a request after a connection_closed response";
    NouveauSearchLatency: Histogram "nouveau/search_latency" "Distribution of overall search request latency as experienced by the end user";
    NouveauUpdateLatency: Histogram "nouveau/update_latency" "Distribution of time during search waiting for the index to be updated";
    PreadExceedEof: Counter "pread/exceed_eof" "number of the attempts to read beyond end of db file";
    PreadExceedLimit: Counter "pread/exceed_limit" "number of the attempts to read beyond set limit";
    RexiBuffered: Counter "rexi/buffered" "number of rexi messages buffered";
    RexiDown: Counter "rexi/down" "number of rexi_DOWN messages handled";
    RexiDropped: Counter "rexi/dropped" "number of rexi messages dropped from buffers";
    RexiStreamsTimeoutInitStream: Counter "rexi/streams/timeout/init_stream" "number of rexi stream initialization timeouts";
    RexiStreamsTimeoutStream: Counter "rexi/streams/timeout/stream" "number of rexi stream timeouts";
    RexiStreamsTimeoutWaitForAck: Counter "rexi/streams/timeout/wait_for_ack" "number of rexi stream timeouts while waiting for acks";
}

/// How many metrics there are.
pub const COUNT: usize = DEFS.len();

impl Metric {
    /// Its definition.
    pub fn def(self) -> &'static Def {
        &DEFS[self as usize]
    }

    /// The counter of responses with `status`, for the codes CouchDB counts.
    pub fn status(status: u16) -> Option<Metric> {
        use Metric::*;
        Some(match status {
            200 => Status200,
            201 => Status201,
            202 => Status202,
            204 => Status204,
            206 => Status206,
            301 => Status301,
            302 => Status302,
            304 => Status304,
            400 => Status400,
            401 => Status401,
            403 => Status403,
            404 => Status404,
            405 => Status405,
            406 => Status406,
            409 => Status409,
            412 => Status412,
            413 => Status413,
            414 => Status414,
            415 => Status415,
            416 => Status416,
            417 => Status417,
            500 => Status500,
            501 => Status501,
            503 => Status503,
            507 => Status507,
            _ => return None,
        })
    }

    /// The counter of requests with `method`, for the methods CouchDB counts.
    pub fn method(method: &str) -> Option<Metric> {
        use Metric::*;
        Some(match method {
            "GET" => MethodGet,
            "HEAD" => MethodHead,
            "POST" => MethodPost,
            "PUT" => MethodPut,
            "DELETE" => MethodDelete,
            "COPY" => MethodCopy,
            "OPTIONS" => MethodOptions,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_unique_and_sorted() {
        for pair in DEFS.windows(2) {
            assert!(
                pair[0].path < pair[1].path,
                "{} {}",
                pair[0].path,
                pair[1].path
            );
        }
        assert_eq!(
            Metric::Status404.def().path,
            "couchdb/httpd_status_codes/404"
        );
        assert_eq!(
            Metric::MethodGet.def().path,
            "couchdb/httpd_request_methods/GET"
        );
    }

    #[test]
    fn every_counted_status_and_method_has_its_metric() {
        for def in DEFS {
            if let Some(code) = def.path.strip_prefix("couchdb/httpd_status_codes/") {
                let m = Metric::status(code.parse().unwrap()).expect(code);
                assert_eq!(m.def().path, def.path);
            }
            if let Some(method) = def.path.strip_prefix("couchdb/httpd_request_methods/") {
                assert_eq!(Metric::method(method).unwrap().def().path, def.path);
            }
        }
    }
}

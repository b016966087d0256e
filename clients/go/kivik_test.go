package goclient

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	kivik "github.com/go-kivik/kivik/v4"
	"github.com/go-kivik/kivik/v4/couchdb" // the CouchDB driver, registered as "couch"
)

// ---------------------------------------------------------------------------------------------
// Connecting

func TestConnectBasicAuth(t *testing.T) {
	client, rec, e := adminClient(t)
	ctx := testCtx(t)

	v, err := client.Version(ctx)
	must(t, err, "Version")
	if !strings.HasPrefix(v.Version, "3.") {
		t.Errorf("Version = %q, want 3.x", v.Version)
	}
	if v.Vendor == "" {
		t.Errorf("Vendor is empty")
	}
	up, err := client.Ping(ctx)
	must(t, err, "Ping")
	if !up {
		t.Errorf("Ping = false")
	}

	s, err := client.Session(ctx)
	must(t, err, "Session")
	if s.Name != e.user || !slices.Contains(s.Roles, "_admin") {
		t.Errorf("Session = name %q roles %v, want %q with _admin", s.Name, s.Roles, e.user)
	}
	if s.AuthenticationMethod != "default" {
		t.Errorf("Session authenticated by %q, want \"default\" (basic auth)", s.AuthenticationMethod)
	}
	if _, err := client.AllDBs(ctx); err != nil {
		t.Errorf("AllDBs as admin: %v", err)
	}
	for _, ex := range rec.exchanges() {
		if !strings.HasPrefix(ex.reqHeader.Get("Authorization"), "Basic ") {
			t.Errorf("%s %s went without basic auth", ex.method, ex.url)
		}
		if strings.HasSuffix(ex.url, "/_session") && ex.method == http.MethodPost {
			t.Errorf("basic auth client posted to _session")
		}
	}

	// Wrong credentials are refused. (They name a user of their own: CouchDB 3.4+ and Settee lock a
	// user name out after a few failures, and the admin must stay usable.)
	bad, _ := newClient(t, e.dsn("", ""), couchdb.BasicAuth(strangerName(), "wrong"))
	_, err = bad.AllDBs(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "AllDBs with wrong credentials")

	// Without credentials: the welcome answers, the session is anonymous, _all_dbs is for admins
	// (CouchDB 3's admin_only_all_dbs).
	anon, _ := newClient(t, e.dsn("", ""))
	if _, err := anon.Version(ctx); err != nil {
		t.Errorf("anonymous Version: %v", err)
	}
	s, err = anon.Session(ctx)
	must(t, err, "anonymous Session")
	if s.Name != "" {
		t.Errorf("anonymous Session name = %q", s.Name)
	}
	_, err = anon.AllDBs(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "anonymous AllDBs")
}

// strangerName is a user name that exists nowhere, new to each call.
func strangerName() string {
	strangers++
	return "kivik-stranger-" + runID + "-" + string(rune('a'+strangers))
}

var strangers int

// checkCookieSession requires that the client logged in with POST /_session first and then sent
// the AuthSession cookie, not basic credentials.
func checkCookieSession(t *testing.T, rec *recorder) {
	t.Helper()
	exs := rec.exchanges()
	if len(exs) < 2 {
		t.Fatalf("only %d requests recorded", len(exs))
	}
	first := exs[0]
	if first.method != http.MethodPost || !strings.HasSuffix(first.url, "/_session") || first.status != http.StatusOK {
		t.Errorf("first request = %s %s -> %d, want POST /_session -> 200", first.method, first.url, first.status)
	}
	if !strings.Contains(strings.Join(first.respHeader.Values("Set-Cookie"), ";"), "AuthSession=") {
		t.Errorf("POST /_session set no AuthSession cookie: %v", first.respHeader.Values("Set-Cookie"))
	}
	for _, ex := range exs[1:] {
		if !strings.Contains(ex.reqHeader.Get("Cookie"), "AuthSession=") {
			t.Errorf("%s %s went without the AuthSession cookie", ex.method, ex.url)
		}
		if ex.reqHeader.Get("Authorization") != "" {
			t.Errorf("%s %s sent an Authorization header", ex.method, ex.url)
		}
	}
}

func TestConnectCookieAuth(t *testing.T) {
	e := env(t)
	ctx := testCtx(t)

	client, rec := newClient(t, e.dsn("", ""), couchdb.CookieAuth(e.user, e.pass))
	s, err := client.Session(ctx)
	must(t, err, "Session")
	if s.Name != e.user || !slices.Contains(s.Roles, "_admin") {
		t.Errorf("Session = name %q roles %v, want %q with _admin", s.Name, s.Roles, e.user)
	}
	if s.AuthenticationMethod != "cookie" {
		t.Errorf("Session authenticated by %q, want \"cookie\"", s.AuthenticationMethod)
	}
	name := dbName("cookie")
	must(t, client.CreateDB(ctx, name), "CreateDB with cookie auth")
	exists, err := client.DBExists(ctx, name)
	must(t, err, "DBExists")
	if !exists {
		t.Errorf("DBExists = false after CreateDB")
	}
	must(t, client.DestroyDB(ctx, name), "DestroyDB with cookie auth")
	checkCookieSession(t, rec)

	// Credentials in the DSN: Kivik's default for them is cookie auth.
	dsnClient, dsnRec := newClient(t, e.dsn(e.user, e.pass))
	s, err = dsnClient.Session(ctx)
	must(t, err, "Session (credentials in the DSN)")
	if s.Name != e.user || s.AuthenticationMethod != "cookie" {
		t.Errorf("Session (DSN) = name %q by %q, want %q by cookie", s.Name, s.AuthenticationMethod, e.user)
	}
	if _, err := dsnClient.AllDBs(ctx); err != nil {
		t.Errorf("AllDBs (DSN credentials): %v", err)
	}
	checkCookieSession(t, dsnRec)

	// Wrong credentials (a user of their own, as above): the login is refused with 401, and so
	// is the request.
	bad, badRec := newClient(t, e.dsn("", ""), couchdb.CookieAuth(strangerName(), "wrong"))
	_, err = bad.AllDBs(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "AllDBs after a refused cookie login")
	if exs := badRec.exchanges(); len(exs) == 0 || exs[0].status != http.StatusUnauthorized {
		t.Errorf("POST /_session with a wrong password was not answered 401")
	}
}

// ---------------------------------------------------------------------------------------------
// Databases

func TestDatabases(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	name := dbName("dbs")

	must(t, client.CreateDB(ctx, name), "CreateDB")
	t.Cleanup(func() { _ = client.DestroyDB(testCtx(t), name) })
	exists, err := client.DBExists(ctx, name)
	must(t, err, "DBExists")
	if !exists {
		t.Errorf("DBExists = false after CreateDB")
	}
	all, err := client.AllDBs(ctx)
	must(t, err, "AllDBs")
	if !slices.Contains(all, name) {
		t.Errorf("AllDBs %v lacks %s", all, name)
	}
	wantStatus(t, client.CreateDB(ctx, name), http.StatusPreconditionFailed, "CreateDB of an existing database")
	wantStatus(t, client.CreateDB(ctx, "Bad Name!"), http.StatusBadRequest, "CreateDB with an illegal name")

	stats, err := client.DB(name).Stats(ctx)
	must(t, err, "Stats")
	if stats.Name != name || stats.DocCount != 0 || stats.DeletedCount != 0 || stats.UpdateSeq == "" {
		t.Errorf("Stats = %+v", stats)
	}
	many, err := client.DBsStats(ctx, []string{name, dbName("never-created")})
	must(t, err, "DBsStats")
	if len(many) != 2 || many[0] == nil || many[0].Name != name || many[1] != nil {
		t.Errorf("DBsStats = %v", many)
	}

	must(t, client.DestroyDB(ctx, name), "DestroyDB")
	exists, err = client.DBExists(ctx, name)
	must(t, err, "DBExists after DestroyDB")
	if exists {
		t.Errorf("DBExists = true after DestroyDB")
	}
	wantStatus(t, client.DestroyDB(ctx, name), http.StatusNotFound, "DestroyDB of a missing database")
	_, err = client.DB(name).Stats(ctx)
	wantStatus(t, err, http.StatusNotFound, "Stats of a missing database")
	wantStatus(t, client.DB(name).Get(ctx, "x").Err(), http.StatusNotFound, "Get in a missing database")
}

// ---------------------------------------------------------------------------------------------
// Documents

type person struct {
	ID   string `json:"_id,omitempty"`
	Rev  string `json:"_rev,omitempty"`
	Type string `json:"type"`
	Name string `json:"name"`
	Age  int    `json:"age,omitempty"`
}

func TestDocumentCRUD(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "docs")

	// Create with a server-made id.
	id, rev, err := db.CreateDoc(ctx, map[string]any{"type": "person", "name": "Zed"})
	must(t, err, "CreateDoc")
	if len(id) != 32 || !strings.HasPrefix(rev, "1-") {
		t.Errorf("CreateDoc = %q %q, want a 32-hex id and a 1- rev", id, rev)
	}

	// Create with a chosen id, from a struct.
	rev1, err := db.Put(ctx, "ann", person{Type: "person", Name: "Ann", Age: 30})
	must(t, err, "Put new")
	if !strings.HasPrefix(rev1, "1-") {
		t.Errorf("Put new rev = %q", rev1)
	}
	var ann person
	row := db.Get(ctx, "ann")
	must(t, row.ScanDoc(&ann), "Get ann")
	if gotRev, _ := row.Rev(); gotRev != rev1 {
		t.Errorf("Get rev = %q, want %q", gotRev, rev1)
	}
	if ann.ID != "ann" || ann.Rev != rev1 || ann.Name != "Ann" || ann.Age != 30 {
		t.Errorf("Get ann = %+v", ann)
	}

	// Update.
	ann.Name = "Anne"
	rev2, err := db.Put(ctx, "ann", ann)
	must(t, err, "Put update")
	if !strings.HasPrefix(rev2, "2-") {
		t.Errorf("Put update rev = %q", rev2)
	}

	// Conflicts: a stale _rev, no _rev, a stale rev= parameter.
	ann.Rev = rev1
	_, err = db.Put(ctx, "ann", ann)
	wantStatus(t, err, http.StatusConflict, "Put with a stale _rev")
	_, err = db.Put(ctx, "ann", map[string]any{"name": "no rev"})
	wantStatus(t, err, http.StatusConflict, "Put without _rev over an existing doc")
	_, err = db.Put(ctx, "ann", map[string]any{"name": "stale param"}, kivik.Rev(rev1))
	wantStatus(t, err, http.StatusConflict, "Put with a stale rev parameter")
	_, _, err = db.CreateDoc(ctx, map[string]any{"_id": "ann"})
	wantStatus(t, err, http.StatusConflict, "CreateDoc (POST) of an existing id")

	got, err := db.GetRev(ctx, "ann")
	must(t, err, "GetRev")
	if got != rev2 {
		t.Errorf("GetRev = %q, want %q", got, rev2)
	}

	// An older revision is still readable (no compaction ran), and revs=true lists the history.
	var old person
	must(t, db.Get(ctx, "ann", kivik.Rev(rev1)).ScanDoc(&old), "Get rev1")
	if old.Name != "Ann" || old.Rev != rev1 {
		t.Errorf("Get rev1 = %+v", old)
	}
	var withRevs struct {
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
	}
	must(t, db.Get(ctx, "ann", kivik.Param("revs", true)).ScanDoc(&withRevs), "Get revs=true")
	if withRevs.Revisions.Start != 2 || len(withRevs.Revisions.IDs) != 2 ||
		"2-"+withRevs.Revisions.IDs[0] != rev2 || "1-"+withRevs.Revisions.IDs[1] != rev1 {
		t.Errorf("_revisions = %+v for %s, %s", withRevs.Revisions, rev1, rev2)
	}

	// Ids that need escaping.
	odd := "with/slash and space+plus?"
	oddRev, err := db.Put(ctx, odd, map[string]any{"odd": true})
	must(t, err, "Put odd id")
	var oddDoc map[string]any
	must(t, db.Get(ctx, odd).ScanDoc(&oddDoc), "Get odd id")
	if oddDoc["_id"] != odd || oddDoc["_rev"] != oddRev {
		t.Errorf("odd doc = %v", oddDoc)
	}

	// Copy.
	copyRev, err := db.Copy(ctx, "ann-copy", "ann")
	must(t, err, "Copy")
	var cp person
	must(t, db.Get(ctx, "ann-copy").ScanDoc(&cp), "Get copy")
	if cp.Name != "Anne" || cp.Rev != copyRev || !strings.HasPrefix(copyRev, "1-") {
		t.Errorf("copy = %+v (rev %s)", cp, copyRev)
	}

	// Local documents.
	localRev, err := db.Put(ctx, "_local/checkpoint", map[string]any{"seq": 7})
	must(t, err, "Put _local")
	if localRev != "0-1" {
		t.Errorf("Put _local rev = %q, want 0-1", localRev)
	}
	var local map[string]any
	must(t, db.Get(ctx, "_local/checkpoint").ScanDoc(&local), "Get _local")
	if local["seq"] != float64(7) {
		t.Errorf("_local doc = %v", local)
	}

	// Delete: a stale rev conflicts, then it is gone (404), then a new write starts it again.
	_, err = db.Delete(ctx, "ann", rev1)
	wantStatus(t, err, http.StatusConflict, "Delete with a stale rev")
	rev3, err := db.Delete(ctx, "ann", rev2)
	must(t, err, "Delete")
	if !strings.HasPrefix(rev3, "3-") {
		t.Errorf("Delete rev = %q", rev3)
	}
	wantStatus(t, db.Get(ctx, "ann").Err(), http.StatusNotFound, "Get deleted")
	wantStatus(t, db.Get(ctx, "nobody").Err(), http.StatusNotFound, "Get missing")
	_, err = db.GetRev(ctx, "ann")
	wantStatus(t, err, http.StatusNotFound, "GetRev deleted")
	var tomb map[string]any
	must(t, db.Get(ctx, "ann", kivik.Rev(rev3)).ScanDoc(&tomb), "Get the deletion's rev")
	if tomb["_deleted"] != true {
		t.Errorf("tombstone = %v", tomb)
	}
	rev4, err := db.Put(ctx, "ann", map[string]any{"name": "Ann again"})
	must(t, err, "Put over a deleted doc")
	if !strings.HasPrefix(rev4, "4-") {
		t.Errorf("Put over a deleted doc rev = %q, want 4-", rev4)
	}

	stats, err := db.Stats(ctx)
	must(t, err, "Stats")
	// Zed, ann, odd, ann-copy (local docs are not counted)
	if stats.DocCount != 4 || stats.DeletedCount != 0 {
		t.Errorf("Stats doc_count %d doc_del_count %d, want 4 and 0", stats.DocCount, stats.DeletedCount)
	}
}

func TestBulkDocs(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "bulk")

	res, err := db.BulkDocs(ctx, []any{
		map[string]any{"_id": "a", "v": 1},
		map[string]any{"_id": "b", "v": 2},
		map[string]any{"v": 3},
	})
	must(t, err, "BulkDocs create")
	if len(res) != 3 {
		t.Fatalf("BulkDocs returned %d results", len(res))
	}
	for i, r := range res {
		if r.Error != nil || !strings.HasPrefix(r.Rev, "1-") || r.ID == "" {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	if res[0].ID != "a" || res[1].ID != "b" || len(res[2].ID) != 32 {
		t.Errorf("ids = %s %s %s", res[0].ID, res[1].ID, res[2].ID)
	}
	revB := res[1].Rev

	// One conflict, one update, one deletion, in one request.
	res, err = db.BulkDocs(ctx, []any{
		map[string]any{"_id": "a", "v": 10},
		map[string]any{"_id": "b", "_rev": revB, "v": 20},
		map[string]any{"_id": res[2].ID, "_rev": res[2].Rev, "_deleted": true},
	})
	must(t, err, "BulkDocs mixed")
	if len(res) != 3 {
		t.Fatalf("BulkDocs returned %d results", len(res))
	}
	if res[0].ID != "a" || kivik.HTTPStatus(res[0].Error) != http.StatusConflict {
		t.Errorf("stale write result = %+v (status %d), want a 409", res[0], kivik.HTTPStatus(res[0].Error))
	}
	if res[1].Error != nil || !strings.HasPrefix(res[1].Rev, "2-") {
		t.Errorf("update result = %+v", res[1])
	}
	if res[2].Error != nil || !strings.HasPrefix(res[2].Rev, "2-") {
		t.Errorf("deletion result = %+v", res[2])
	}
	wantStatus(t, db.Get(ctx, res[2].ID).Err(), http.StatusNotFound, "Get bulk-deleted doc")
	var b map[string]any
	must(t, db.Get(ctx, "b").ScanDoc(&b), "Get b")
	if b["v"] != float64(20) {
		t.Errorf("b = %v", b)
	}

	// Replication-style writes: new_edits=false keeps the given revisions and answers no rows.
	rev := "3-" + strings.Repeat("c", 32)
	res, err = db.BulkDocs(ctx, []any{map[string]any{
		"_id": "replicated", "_rev": rev, "v": 3,
		"_revisions": map[string]any{"start": 3, "ids": []string{
			strings.Repeat("c", 32), strings.Repeat("b", 32), strings.Repeat("a", 32)}},
	}}, kivik.Param("new_edits", false))
	must(t, err, "BulkDocs new_edits=false")
	if len(res) != 0 {
		t.Errorf("new_edits=false results = %+v, want none", res)
	}
	got, err := db.GetRev(ctx, "replicated")
	must(t, err, "GetRev replicated")
	if got != rev {
		t.Errorf("replicated rev = %q, want %q", got, rev)
	}

	// _bulk_get.
	rows := db.BulkGet(ctx, []kivik.BulkGetReference{{ID: "b"}, {ID: "nope"}, {ID: "replicated", Rev: rev}})
	var seen []string
	for rows.Next() {
		id, err := rows.ID()
		switch id {
		case "b", "replicated":
			var doc map[string]any
			if err := rows.ScanDoc(&doc); err != nil {
				t.Errorf("BulkGet %s: %v", id, err)
			} else if doc["_id"] != id {
				t.Errorf("BulkGet %s doc = %v", id, doc)
			}
		case "nope":
			if err == nil || !strings.Contains(err.Error(), "not_found") {
				t.Errorf("BulkGet nope: err = %v, want not_found", err)
			}
		}
		seen = append(seen, id)
	}
	must(t, rows.Err(), "BulkGet")
	if !equalStrings(seen, []string{"b", "nope", "replicated"}) {
		t.Errorf("BulkGet ids = %v", seen)
	}
}

// ---------------------------------------------------------------------------------------------
// _all_docs

func TestAllDocs(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "alldocs")

	revs := map[string]string{}
	for i := 1; i <= 5; i++ {
		id := "doc-" + string(rune('0'+i))
		rev, err := db.Put(ctx, id, map[string]any{"n": i})
		must(t, err, "Put "+id)
		revs[id] = rev
	}

	type rowT struct {
		id, key, rev string
		n            int
	}
	collect := func(rs *kivik.ResultSet, docs bool) ([]rowT, *kivik.ResultMetadata) {
		t.Helper()
		var out []rowT
		for rs.Next() {
			var r rowT
			r.id, _ = rs.ID()
			var key string
			_ = rs.ScanKey(&key)
			r.key = key
			var value struct {
				Rev string `json:"rev"`
			}
			if err := rs.ScanValue(&value); err == nil {
				r.rev = value.Rev
			}
			if docs {
				var doc struct {
					N int `json:"n"`
				}
				if err := rs.ScanDoc(&doc); err == nil {
					r.n = doc.N
				}
			}
			out = append(out, r)
		}
		must(t, rs.Err(), "AllDocs iteration")
		meta, err := rs.Metadata()
		must(t, err, "Metadata")
		return out, meta
	}
	ids := func(rows []rowT) []string {
		var s []string
		for _, r := range rows {
			s = append(s, r.id)
		}
		return s
	}

	rows, meta := collect(db.AllDocs(ctx), false)
	if !equalStrings(ids(rows), []string{"doc-1", "doc-2", "doc-3", "doc-4", "doc-5"}) {
		t.Errorf("AllDocs ids = %v", ids(rows))
	}
	for _, r := range rows {
		if r.key != r.id || r.rev != revs[r.id] {
			t.Errorf("AllDocs row = %+v, want key = id and rev %s", r, revs[r.id])
		}
	}
	if meta.TotalRows != 5 || meta.Offset != 0 {
		t.Errorf("AllDocs total_rows %d offset %d", meta.TotalRows, meta.Offset)
	}

	rows, _ = collect(db.AllDocs(ctx, kivik.IncludeDocs()), true)
	for i, r := range rows {
		if r.n != i+1 {
			t.Errorf("include_docs row %d = %+v", i, r)
		}
	}

	// startkey/endkey (JSON-encoded by Kivik), descending, limit, skip, inclusive_end, update_seq.
	rows, meta = collect(db.AllDocs(ctx, kivik.Params(map[string]any{"startkey": "doc-2", "endkey": "doc-4"})), false)
	if !equalStrings(ids(rows), []string{"doc-2", "doc-3", "doc-4"}) || meta.Offset != 1 {
		t.Errorf("startkey/endkey ids = %v offset %d", ids(rows), meta.Offset)
	}
	rows, _ = collect(db.AllDocs(ctx, kivik.Params(map[string]any{"start_key": "doc-2", "end_key": "doc-4", "inclusive_end": false})), false)
	if !equalStrings(ids(rows), []string{"doc-2", "doc-3"}) {
		t.Errorf("inclusive_end=false ids = %v", ids(rows))
	}
	rows, _ = collect(db.AllDocs(ctx, kivik.Params(map[string]any{"descending": true, "limit": 2, "skip": 1})), false)
	if !equalStrings(ids(rows), []string{"doc-4", "doc-3"}) {
		t.Errorf("descending/limit/skip ids = %v", ids(rows))
	}
	_, meta = collect(db.AllDocs(ctx, kivik.Param("update_seq", true)), false)
	if meta.UpdateSeq == "" {
		t.Errorf("update_seq=true gave no update_seq")
	}

	// keys: Kivik POSTs them. Rows come in the keys' order; a missing key gives an error row.
	rs := db.AllDocs(ctx, kivik.Params(map[string]any{"keys": []string{"doc-3", "missing", "doc-1"}}), kivik.IncludeDocs())
	var got []string
	for rs.Next() {
		var key string
		_ = rs.ScanKey(&key)
		id, _ := rs.ID()
		var doc struct {
			ID string `json:"_id"`
			N  int    `json:"n"`
		}
		docErr := rs.ScanDoc(&doc)
		switch key {
		case "missing":
			if id != "" || docErr == nil {
				t.Errorf("missing key row: id %q, doc error %v", id, docErr)
			}
		default:
			if id != key || docErr != nil || doc.ID != key {
				t.Errorf("keys row %s: id %q doc %+v err %v", key, id, doc, docErr)
			}
		}
		got = append(got, key)
	}
	must(t, rs.Err(), "AllDocs keys")
	if !equalStrings(got, []string{"doc-3", "missing", "doc-1"}) {
		t.Errorf("keys rows = %v", got)
	}

	// A deleted document, asked for by key, is a row with value.deleted and no doc.
	_, err := db.Delete(ctx, "doc-2", revs["doc-2"])
	must(t, err, "Delete doc-2")
	rs = db.AllDocs(ctx, kivik.Params(map[string]any{"keys": []string{"doc-2"}}))
	if !rs.Next() {
		t.Fatalf("keys=[doc-2] gave no row: %v", rs.Err())
	}
	var value struct {
		Rev     string `json:"rev"`
		Deleted bool   `json:"deleted"`
	}
	must(t, rs.ScanValue(&value), "ScanValue deleted row")
	if !value.Deleted || !strings.HasPrefix(value.Rev, "2-") {
		t.Errorf("deleted row value = %+v", value)
	}
	_ = rs.Close()
}

// ---------------------------------------------------------------------------------------------
// Views

func TestViews(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "views")

	ddoc := map[string]any{
		"language": "javascript",
		"views": map[string]any{
			"by_type": map[string]any{
				"map":    "function (doc) { if (doc.type) { emit(doc.type, doc.n); } }",
				"reduce": "_sum",
			},
			"by_type_js": map[string]any{
				"map":    "function (doc) { if (doc.type) { emit(doc.type, doc.n); } }",
				"reduce": "function (keys, values, rereduce) { return sum(values); }",
			},
			"by_pair": map[string]any{
				"map":    "function (doc) { if (doc.type) { emit([doc.type, doc.n], null); } }",
				"reduce": "_count",
			},
		},
	}
	_, err := db.Put(ctx, "_design/stats", ddoc)
	must(t, err, "Put design doc")
	docs := []any{
		map[string]any{"_id": "a1", "type": "apple", "n": 1},
		map[string]any{"_id": "a2", "type": "apple", "n": 2},
		map[string]any{"_id": "a3", "type": "apple", "n": 3},
		map[string]any{"_id": "b1", "type": "banana", "n": 10},
		map[string]any{"_id": "b2", "type": "banana", "n": 20},
		map[string]any{"_id": "c1", "type": "cherry", "n": 100},
		map[string]any{"_id": "x", "untyped": true},
	}
	_, err = db.BulkDocs(ctx, docs)
	must(t, err, "BulkDocs")

	type viewRow struct {
		id    string
		key   any
		value any
		docN  float64
	}
	query := func(view string, opts ...kivik.Option) ([]viewRow, *kivik.ResultMetadata) {
		t.Helper()
		rs := db.Query(ctx, "_design/stats", "_view/"+view, opts...)
		var out []viewRow
		for rs.Next() {
			var r viewRow
			r.id, _ = rs.ID()
			_ = rs.ScanKey(&r.key)
			_ = rs.ScanValue(&r.value)
			var doc map[string]any
			if rs.ScanDoc(&doc) == nil {
				r.docN, _ = doc["n"].(float64)
			}
			out = append(out, r)
		}
		if err := rs.Err(); err != nil {
			t.Errorf("Query %s %v: %v (HTTP %d)", view, opts, err, kivik.HTTPStatus(err))
			return nil, nil
		}
		meta, err := rs.Metadata()
		must(t, err, "Metadata")
		return out, meta
	}
	asJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	keysValues := func(rows []viewRow) string {
		var parts []string
		for _, r := range rows {
			parts = append(parts, asJSON(r.key)+"="+asJSON(r.value))
		}
		return strings.Join(parts, " ")
	}

	// Reduced to one row.
	rows, _ := query("by_type")
	if got := keysValues(rows); got != "null=136" {
		t.Errorf("reduce: %s", got)
	}
	// group=true.
	rows, _ = query("by_type", kivik.Param("group", true))
	if got := keysValues(rows); got != `"apple"=6 "banana"=30 "cherry"=100` {
		t.Errorf("group=true: %s", got)
	}
	rows, _ = query("by_type_js", kivik.Param("group", true))
	if got := keysValues(rows); got != `"apple"=6 "banana"=30 "cherry"=100` {
		t.Errorf("JavaScript reduce, group=true: %s", got)
	}
	// reduce=false with startkey/endkey, and include_docs.
	rows, meta := query("by_type", kivik.Params(map[string]any{"reduce": false, "startkey": "banana", "endkey": "cherry", "include_docs": true}))
	if got := keysValues(rows); got != `"banana"=10 "banana"=20 "cherry"=100` {
		t.Errorf("reduce=false startkey/endkey: %s", got)
	}
	if len(rows) == 3 && (rows[0].id != "b1" || rows[2].id != "c1" || rows[2].docN != 100) {
		t.Errorf("reduce=false rows = %+v", rows)
	}
	if meta != nil && (meta.TotalRows != 6 || meta.Offset != 3) {
		t.Errorf("reduce=false total_rows %d offset %d, want 6 and 3", meta.TotalRows, meta.Offset)
	}
	// keys (POSTed by Kivik), with reduce=false and with group=true.
	rows, _ = query("by_type", kivik.Params(map[string]any{"reduce": false, "keys": []string{"cherry", "apple"}}))
	if got := keysValues(rows); got != `"cherry"=100 "apple"=1 "apple"=2 "apple"=3` {
		t.Errorf("keys, reduce=false: %s", got)
	}
	rows, _ = query("by_type", kivik.Params(map[string]any{"group": true, "keys": []string{"cherry", "apple", "durian"}}))
	if got := keysValues(rows); got != `"cherry"=100 "apple"=6` {
		t.Errorf("keys, group=true: %s", got)
	}
	// Complex keys: group_level, and a range over one prefix.
	rows, _ = query("by_pair", kivik.Param("group_level", 1))
	if got := keysValues(rows); got != `["apple"]=3 ["banana"]=2 ["cherry"]=1` {
		t.Errorf("group_level=1: %s", got)
	}
	rows, _ = query("by_pair", kivik.Params(map[string]any{"reduce": false, "startkey": []any{"banana"}, "endkey": []any{"banana", map[string]any{}}}))
	if got := keysValues(rows); got != `["banana",10]=null ["banana",20]=null` {
		t.Errorf("complex startkey/endkey: %s", got)
	}
	// descending, limit, skip.
	rows, _ = query("by_type", kivik.Params(map[string]any{"reduce": false, "descending": true, "limit": 2, "skip": 1}))
	if got := keysValues(rows); got != `"banana"=20 "banana"=10` {
		t.Errorf("descending/limit/skip: %s", got)
	}

	// The index follows updates.
	_, err = db.Put(ctx, "c2", map[string]any{"type": "cherry", "n": 1000})
	must(t, err, "Put c2")
	rows, _ = query("by_type", kivik.Params(map[string]any{"group": true, "key": "cherry"}))
	if got := keysValues(rows); got != `"cherry"=1100` {
		t.Errorf("after an update: %s", got)
	}

	// A missing view, and reduce on a view without one.
	rs := db.Query(ctx, "stats", "nope")
	rs.Next()
	wantStatus(t, rs.Err(), http.StatusNotFound, "Query a missing view")
	rs = db.Query(ctx, "stats", "by_type", kivik.Params(map[string]any{"group": true, "include_docs": true}))
	rs.Next()
	wantStatus(t, rs.Err(), http.StatusBadRequest, "group=true with include_docs")
}

// ---------------------------------------------------------------------------------------------
// Mango

func TestFind(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "find")

	var docs []any
	for i, name := range []string{"ann", "bob", "cat", "dan", "eve"} {
		docs = append(docs, map[string]any{"_id": name, "type": "person", "name": name, "age": 20 + 5*i})
	}
	docs = append(docs, map[string]any{"_id": "rex", "type": "dog", "age": 3})
	_, err := db.BulkDocs(ctx, docs)
	must(t, err, "BulkDocs")

	type found struct {
		ID   string `json:"_id"`
		Rev  string `json:"_rev"`
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	find := func(query any) ([]found, *kivik.ResultMetadata, error) {
		rs := db.Find(ctx, query)
		var out []found
		for rs.Next() {
			var f found
			if err := rs.ScanDoc(&f); err != nil {
				return nil, nil, err
			}
			out = append(out, f)
		}
		if err := rs.Err(); err != nil {
			return nil, nil, err
		}
		meta, err := rs.Metadata()
		return out, meta, err
	}

	// No index: CouchDB answers from _all_docs, in _id order, with a warning.
	res, meta, err := find(map[string]any{
		"selector": map[string]any{"type": "person", "age": map[string]any{"$gt": 24}},
		"fields":   []string{"_id", "age"},
	})
	must(t, err, "Find")
	if len(res) != 4 || res[0].ID != "bob" || res[3].ID != "eve" || res[0].Age != 25 {
		t.Errorf("Find = %+v", res)
	}
	for _, f := range res {
		if f.Rev != "" || f.Name != "" {
			t.Errorf("fields [_id, age] returned %+v", f)
		}
	}
	if meta.Warning == "" {
		t.Errorf("Find without an index gave no warning")
	}
	if meta.Bookmark == "" {
		t.Errorf("Find gave no bookmark")
	}

	// Paging with limit and the bookmark.
	res, meta, err = find(map[string]any{"selector": map[string]any{"type": "person"}, "limit": 2})
	must(t, err, "Find limit 2")
	if len(res) != 2 || res[0].ID != "ann" || res[1].ID != "bob" || res[0].Rev == "" {
		t.Errorf("page 1 = %+v", res)
	}
	res, _, err = find(map[string]any{"selector": map[string]any{"type": "person"}, "limit": 2, "bookmark": meta.Bookmark})
	must(t, err, "Find page 2")
	if len(res) != 2 || res[0].ID != "cat" || res[1].ID != "dan" {
		t.Errorf("page 2 = %+v", res)
	}

	// Operators, and a query as a JSON string.
	res, _, err = find(`{"selector": {"$or": [{"name": {"$regex": "^e"}}, {"age": {"$lt": 5}}]}, "skip": 0}`)
	must(t, err, "Find $or/$regex")
	if len(res) != 2 || res[0].ID != "eve" || res[1].ID != "rex" {
		t.Errorf("$or/$regex = %+v", res)
	}
	// Sorting by _id, with a selector on _id, needs no index.
	res, _, err = find(map[string]any{"selector": map[string]any{"_id": map[string]any{"$gt": "a"}, "type": "person"}, "sort": []any{"_id"}, "skip": 1, "limit": 1})
	must(t, err, "Find sort _id")
	if len(res) != 1 || res[0].ID != "bob" {
		t.Errorf("sort _id, skip 1, limit 1 = %+v", res)
	}

	// Bad queries are 400s.
	_, _, err = find(map[string]any{"selector": map[string]any{"age": map[string]any{"$bogus": 1}}})
	wantStatus(t, err, http.StatusBadRequest, "Find with an unknown operator")
	_, _, err = find(map[string]any{"selector": map[string]any{"type": "person"}, "sort": []any{"age"}})
	wantStatus(t, err, http.StatusBadRequest, "Find sorted on a field no index covers")

	// Indexes.
	err = db.CreateIndex(ctx, "by-age", "age-idx", map[string]any{"fields": []string{"age"}})
	must(t, err, "CreateIndex")
	idx, err := db.GetIndexes(ctx)
	must(t, err, "GetIndexes")
	var names []string
	for _, i := range idx {
		names = append(names, i.Name)
	}
	if !slices.Contains(names, "age-idx") || !slices.Contains(names, "_all_docs") {
		t.Errorf("GetIndexes = %v", names)
	}
	res, meta, err = find(map[string]any{"selector": map[string]any{"age": map[string]any{"$gte": 30}}, "sort": []any{map[string]string{"age": "desc"}}})
	must(t, err, "Find with the index")
	if len(res) != 3 || res[0].ID != "eve" || res[2].ID != "cat" || meta.Warning != "" {
		t.Errorf("Find with the index = %+v, warning %q", res, meta.Warning)
	}
	must(t, db.DeleteIndex(ctx, "by-age", "age-idx"), "DeleteIndex")
}

// ---------------------------------------------------------------------------------------------
// Attachments

func md5Digest(b []byte) string {
	sum := md5.Sum(b)
	return "md5-" + base64.StdEncoding.EncodeToString(sum[:])
}

func TestAttachments(t *testing.T) {
	client, rec, e := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "atts")
	// Kivik gzips request bodies by default (Content-Encoding: gzip), attachment uploads included;
	// CouchDB keeps such an attachment gzip-encoded ("encoding": "gzip"). A second client made
	// with couchdb.OptionNoRequestCompression() uploads as is.
	plain, plainRec := newClient(t, e.dsn("", ""), couchdb.BasicAuth(e.user, e.pass), couchdb.OptionNoRequestCompression())
	plainDB := plain.DB(db.Name())

	hello := []byte("Hello, Settee!")
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}

	// PutAttachment without a rev creates the document (gzip-encoded upload).
	rev1, err := db.PutAttachment(ctx, "holder", &kivik.Attachment{
		Filename: "hello.txt", ContentType: "text/plain", Content: io.NopCloser(bytes.NewReader(hello)),
	})
	must(t, err, "PutAttachment (new doc)")
	if !strings.HasPrefix(rev1, "1-") {
		t.Errorf("PutAttachment rev = %q", rev1)
	}
	// A second one, uploaded without compression.
	rev2, err := plainDB.PutAttachment(ctx, "holder", &kivik.Attachment{
		Filename: "data.bin", ContentType: "application/octet-stream", Content: io.NopCloser(bytes.NewReader(binary)),
	}, kivik.Rev(rev1))
	must(t, err, "PutAttachment (second)")
	_, err = db.PutAttachment(ctx, "holder", &kivik.Attachment{
		Filename: "late.txt", ContentType: "text/plain", Content: io.NopCloser(strings.NewReader("x")),
	}, kivik.Rev(rev1))
	wantStatus(t, err, http.StatusConflict, "PutAttachment with a stale rev")

	// GetAttachment: Go's transport asks for gzip and decodes it. Kivik gives the digest from the
	// ETag, without "md5-".
	att, err := db.GetAttachment(ctx, "holder", "hello.txt")
	must(t, err, "GetAttachment")
	content, _ := io.ReadAll(att.Content)
	att.Content.Close()
	helloDigest := "md5-" + att.Digest
	if !bytes.Equal(content, hello) || att.ContentType != "text/plain" || att.Digest == "" {
		t.Errorf("GetAttachment = %q type %q digest %q", content, att.ContentType, att.Digest)
	}
	att, err = db.GetAttachment(ctx, "holder", "data.bin")
	must(t, err, "GetAttachment binary")
	content, _ = io.ReadAll(att.Content)
	att.Content.Close()
	if !bytes.Equal(content, binary) || att.ContentType != "application/octet-stream" || "md5-"+att.Digest != md5Digest(binary) {
		t.Errorf("GetAttachment binary: %d bytes, type %q, digest %q", len(content), att.ContentType, att.Digest)
	}
	meta, err := db.GetAttachmentMeta(ctx, "holder", "data.bin")
	must(t, err, "GetAttachmentMeta")
	if "md5-"+meta.Digest != md5Digest(binary) || meta.ContentType != "application/octet-stream" {
		t.Errorf("GetAttachmentMeta = type %q digest %q", meta.ContentType, meta.Digest)
	}
	_, err = db.GetAttachment(ctx, "holder", "absent.txt")
	wantStatus(t, err, http.StatusNotFound, "GetAttachment missing")

	// The document carries stubs.
	type stub struct {
		ContentType   string `json:"content_type"`
		Stub          bool   `json:"stub"`
		Length        int    `json:"length"`
		RevPos        int    `json:"revpos"`
		Digest        string `json:"digest"`
		Encoding      string `json:"encoding"`
		EncodedLength int    `json:"encoded_length"`
	}
	var doc struct {
		Attachments map[string]stub `json:"_attachments"`
	}
	must(t, db.Get(ctx, "holder").ScanDoc(&doc), "Get holder")
	if s := doc.Attachments["hello.txt"]; !s.Stub || s.ContentType != "text/plain" || s.RevPos != 1 || s.Digest != helloDigest {
		t.Errorf("hello.txt stub = %+v, want digest %s", s, helloDigest)
	}
	if s := doc.Attachments["data.bin"]; (s != stub{ContentType: "application/octet-stream", Stub: true, Length: 256, RevPos: 2, Digest: md5Digest(binary)}) {
		t.Errorf("data.bin stub = %+v", s)
	}

	// attachments=true: Kivik asks for multipart/related and reads the attachments from the parts;
	// a gzip-encoded one comes encoded, with its ContentEncoding.
	getAll := db.Get(ctx, "holder", kivik.Param("attachments", true))
	must(t, getAll.Err(), "Get attachments=true")
	gotAtts := map[string][]byte{}
	if atts, err := getAll.Attachments(); err != nil {
		t.Errorf("Get attachments=true: Attachments(): %v", err)
	} else {
		for {
			a, err := atts.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("attachments iterator: %v", err)
				break
			}
			var r io.Reader = a.Content
			if a.ContentEncoding == "gzip" {
				if r, err = gzip.NewReader(a.Content); err != nil {
					t.Errorf("%s: %v", a.Filename, err)
					continue
				}
			}
			body, _ := io.ReadAll(r)
			gotAtts[a.Filename] = body
		}
	}
	if !bytes.Equal(gotAtts["hello.txt"], hello) || !bytes.Equal(gotAtts["data.bin"], binary) {
		t.Errorf("multipart attachments = %q", gotAtts)
	}
	// The same as JSON with inline base64 data.
	var inline struct {
		Attachments kivik.Attachments `json:"_attachments"`
	}
	must(t, db.Get(ctx, "holder", kivik.Param("attachments", true), couchdb.OptionNoMultipartGet()).ScanDoc(&inline), "Get attachments=true as JSON")
	if a := inline.Attachments.Get("data.bin"); a == nil {
		t.Errorf("inline attachments = %v", inline.Attachments)
	} else if body, _ := io.ReadAll(a.Content); !bytes.Equal(body, binary) {
		t.Errorf("inline data.bin = %d bytes", len(body))
	}
	if a := inline.Attachments.Get("hello.txt"); a == nil {
		t.Errorf("inline attachments = %v", inline.Attachments)
	} else if body, _ := io.ReadAll(a.Content); !bytes.Equal(body, hello) {
		t.Errorf("inline hello.txt = %q", body)
	}

	// DeleteAttachment.
	_, err = db.DeleteAttachment(ctx, "holder", rev1, "hello.txt")
	wantStatus(t, err, http.StatusConflict, "DeleteAttachment with a stale rev")
	rev3, err := db.DeleteAttachment(ctx, "holder", rev2, "hello.txt")
	must(t, err, "DeleteAttachment")
	if !strings.HasPrefix(rev3, "3-") {
		t.Errorf("DeleteAttachment rev = %q", rev3)
	}
	_, err = db.GetAttachment(ctx, "holder", "hello.txt")
	wantStatus(t, err, http.StatusNotFound, "GetAttachment after DeleteAttachment")
	if _, err := db.GetAttachment(ctx, "holder", "data.bin"); err != nil {
		t.Errorf("the other attachment went too: %v", err)
	}

	// A document written with its attachments in one Put. Kivik v4.5.2 sends a multipart/related
	// body when it is given couchdb.OptionNoMultipartPut() (the flag's test is inverted in that
	// release) and inline base64 JSON otherwise; both are written here and checked below.
	//
	// Kivik gzips request bodies by default, and for a multipart body it declares the
	// uncompressed length as Content-Length, so Go's transport refuses to send it: the multipart
	// Put goes through the client without request compression.
	for i, opts := range [][]kivik.Option{nil, {couchdb.OptionNoMultipartPut()}} {
		id := []string{"with-atts-json", "with-atts-multipart"}[i]
		putDB := []*kivik.DB{db, plainDB}[i]
		a1, err := couchdb.NewAttachment("notes.txt", "text/plain", strings.NewReader("some notes"))
		must(t, err, "NewAttachment")
		a2, err := couchdb.NewAttachment("blob.bin", "application/octet-stream", bytes.NewReader(binary))
		must(t, err, "NewAttachment")
		rev, err := putDB.Put(ctx, id, map[string]any{
			"title":        id,
			"_attachments": &kivik.Attachments{"notes.txt": a1, "blob.bin": a2},
		}, opts...)
		must(t, err, "Put with attachments "+id)
		if !strings.HasPrefix(rev, "1-") {
			t.Errorf("%s rev = %q", id, rev)
		}
		var d map[string]any
		must(t, db.Get(ctx, id).ScanDoc(&d), "Get "+id)
		if d["title"] != id {
			t.Errorf("%s = %v", id, d)
		}
		for name, want := range map[string][]byte{"notes.txt": []byte("some notes"), "blob.bin": binary} {
			a, err := db.GetAttachment(ctx, id, name)
			if err != nil {
				t.Errorf("%s/%s: %v", id, name, err)
				continue
			}
			body, _ := io.ReadAll(a.Content)
			a.Content.Close()
			if !bytes.Equal(body, want) {
				t.Errorf("%s/%s = %d bytes, want %d", id, name, len(body), len(want))
			}
		}
	}
	var putTypes []string
	for _, ex := range append(rec.exchanges(), plainRec.exchanges()...) {
		if ex.method == http.MethodPut && strings.Contains(ex.url, "/with-atts-") {
			putTypes = append(putTypes, ex.reqHeader.Get("Content-Type"))
		}
	}
	sort.Strings(putTypes)
	if len(putTypes) != 2 || !strings.HasPrefix(putTypes[0], "application/json") || !strings.HasPrefix(putTypes[1], "multipart/related") {
		t.Errorf("the two Puts went as %q, want one JSON and one multipart/related", putTypes)
	}
}

// ---------------------------------------------------------------------------------------------
// Changes

type changeSeen struct {
	id      string
	deleted bool
	revs    []string
	seq     string
	doc     map[string]any
}

func readChanges(ch *kivik.Changes, docs bool) ([]changeSeen, *kivik.ChangesMetadata, error) {
	var out []changeSeen
	for ch.Next() {
		c := changeSeen{id: ch.ID(), deleted: ch.Deleted(), revs: ch.Changes(), seq: ch.Seq()}
		if docs {
			_ = ch.ScanDoc(&c.doc)
		}
		out = append(out, c)
	}
	if err := ch.Err(); err != nil {
		return out, nil, err
	}
	meta, err := ch.Metadata()
	return out, meta, err
}

// safeNext is feed.Next, with a panic turned into a result. Kivik v4.5.2 dereferences a nil
// metadata pointer (couchdb changesRows.LastSeq) when a continuous feed's stream ends.
func safeNext(feed *kivik.Changes) (ok, panicked bool) {
	defer func() {
		if recover() != nil {
			ok, panicked = false, true
		}
	}()
	return feed.Next(), false
}

// feedEnds reads a continuous feed to its end: the ids of any further changes, whether the
// server closed it with its {"last_seq": ...} line (Kivik v4.5.2 hands that line over as a change
// without an id), and any error.
func feedEnds(feed *kivik.Changes) (more []string, lastSeqLine bool, err error) {
	for {
		ok, panicked := safeNext(feed)
		if panicked {
			return more, lastSeqLine, nil
		}
		if !ok {
			return more, lastSeqLine, feed.Err()
		}
		if feed.ID() == "" {
			lastSeqLine = true
		} else {
			more = append(more, feed.ID())
		}
	}
}

func changedIDs(cs []changeSeen) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.id)
	}
	sort.Strings(ids)
	return ids
}

func TestChanges(t *testing.T) {
	client, _, _ := adminClient(t)
	ctx := testCtx(t)
	db := freshDB(t, client, "changes")

	revs := map[string]string{}
	for _, id := range []string{"a", "b", "c"} {
		rev, err := db.Put(ctx, id, map[string]any{"v": id})
		must(t, err, "Put "+id)
		revs[id] = rev
	}
	delRev, err := db.Delete(ctx, "b", revs["b"])
	must(t, err, "Delete b")

	// Normal feed.
	cs, meta, err := readChanges(db.Changes(ctx), false)
	must(t, err, "Changes")
	if !equalStrings(changedIDs(cs), []string{"a", "b", "c"}) {
		t.Errorf("Changes ids = %v", changedIDs(cs))
	}
	for _, c := range cs {
		want := revs[c.id]
		if c.id == "b" {
			want = delRev
		}
		if c.deleted != (c.id == "b") || !equalStrings(c.revs, []string{want}) || c.seq == "" {
			t.Errorf("change %+v, want rev %s", c, want)
		}
	}
	if meta.LastSeq == "" || meta.Pending != 0 {
		t.Errorf("Changes metadata = %+v", meta)
	}
	lastSeq := meta.LastSeq

	// include_docs, limit (pending counts the rest), since, the _doc_ids filter (POSTed).
	cs, _, err = readChanges(db.Changes(ctx, kivik.IncludeDocs()), true)
	must(t, err, "Changes include_docs")
	for _, c := range cs {
		if c.doc["_id"] != c.id || (c.id != "b" && c.doc["v"] != c.id) || (c.id == "b" && c.doc["_deleted"] != true) {
			t.Errorf("include_docs change %s doc = %v", c.id, c.doc)
		}
	}
	cs, meta, err = readChanges(db.Changes(ctx, kivik.Param("limit", 1)), false)
	must(t, err, "Changes limit=1")
	if len(cs) != 1 || meta.Pending != 2 {
		t.Errorf("limit=1: %d changes, pending %d; want 1 and 2", len(cs), meta.Pending)
	}
	cs, meta, err = readChanges(db.Changes(ctx, kivik.Param("since", lastSeq)), false)
	must(t, err, "Changes since=last_seq")
	if len(cs) != 0 || meta.LastSeq == "" {
		t.Errorf("since=last_seq: %v, last_seq %q", changedIDs(cs), meta.LastSeq)
	}
	cs, _, err = readChanges(db.Changes(ctx, kivik.Params(map[string]any{"filter": "_doc_ids", "doc_ids": []string{"c", "a"}})), false)
	must(t, err, "Changes filter=_doc_ids")
	if !equalStrings(changedIDs(cs), []string{"a", "c"}) {
		t.Errorf("_doc_ids filter ids = %v", changedIDs(cs))
	}

	// Longpoll with nothing new: answers empty once the timeout passes.
	start := time.Now()
	cs, meta, err = readChanges(db.Changes(ctx, kivik.Params(map[string]any{"feed": "longpoll", "since": lastSeq, "timeout": 300})), false)
	must(t, err, "longpoll timeout")
	if len(cs) != 0 || meta.LastSeq == "" || time.Since(start) > 10*time.Second {
		t.Errorf("longpoll with nothing new: %v, last_seq %q, took %v", changedIDs(cs), meta.LastSeq, time.Since(start))
	}

	// Longpoll: a write while it waits ends it with that change.
	type feedResult struct {
		cs  []changeSeen
		err error
	}
	done := make(chan feedResult, 1)
	go func() {
		cs, _, err := readChanges(db.Changes(ctx, kivik.Params(map[string]any{"feed": "longpoll", "since": lastSeq, "timeout": 10000})), false)
		done <- feedResult{cs, err}
	}()
	time.Sleep(300 * time.Millisecond)
	_, err = db.Put(ctx, "d", map[string]any{"v": "d"})
	must(t, err, "Put d")
	select {
	case r := <-done:
		if r.err != nil || !equalStrings(changedIDs(r.cs), []string{"d"}) {
			t.Errorf("longpoll: %v, %v; want d", changedIDs(r.cs), r.err)
		}
	case <-time.After(8 * time.Second):
		t.Errorf("longpoll did not answer the write within 8s")
	}

	// Continuous with a timeout: everything since 0, then the server ends the feed (with a
	// last_seq line) once the timeout passes.
	start = time.Now()
	feed := db.Changes(ctx, kivik.Params(map[string]any{"feed": "continuous", "since": "0", "timeout": 1000}))
	cs = nil
	for len(cs) < 4 && feed.Next() {
		cs = append(cs, changeSeen{id: feed.ID(), deleted: feed.Deleted(), revs: feed.Changes(), seq: feed.Seq()})
	}
	must(t, feed.Err(), "continuous feed")
	if !equalStrings(changedIDs(cs), []string{"a", "b", "c", "d"}) {
		t.Errorf("continuous: %v", changedIDs(cs))
	}
	if more, lastSeqLine, err := feedEnds(feed); len(more) != 0 || !lastSeqLine || err != nil {
		t.Errorf("continuous feed with timeout=1000 ended with further changes %v, a last_seq line: %v, error %v", more, lastSeqLine, err)
	}
	if el := time.Since(start); el < 900*time.Millisecond || el > 10*time.Second {
		t.Errorf("continuous feed with timeout=1000 ended after %v", el)
	}
	_ = feed.Close()

	// Continuous from now with heartbeats: a live write arrives; the client then hangs up.
	live := db.Changes(ctx, kivik.Params(map[string]any{"feed": "continuous", "since": "now", "heartbeat": 200, "timeout": 10000}))
	got := make(chan string, 1)
	go func() {
		if live.Next() {
			got <- live.ID()
		} else {
			got <- "error: " + func() string {
				if live.Err() != nil {
					return live.Err().Error()
				}
				return "feed ended"
			}()
		}
	}()
	time.Sleep(500 * time.Millisecond)
	_, err = db.Put(ctx, "e", map[string]any{"v": "e"})
	must(t, err, "Put e")
	select {
	case id := <-got:
		if id != "e" {
			t.Errorf("continuous live change = %q, want e", id)
		}
	case <-time.After(8 * time.Second):
		t.Errorf("continuous feed did not deliver the write within 8s")
	}
	_ = live.Close()
}

// ---------------------------------------------------------------------------------------------
// Replication

func TestReplicate(t *testing.T) {
	client, _, e := adminClient(t)
	ctx := testCtx(t)
	src := freshDB(t, client, "repl-src")
	tgt := freshDB(t, client, "repl-tgt")
	for _, id := range []string{"r1", "r2", "r3"} {
		_, err := src.Put(ctx, id, map[string]any{"v": id})
		must(t, err, "Put "+id)
	}

	rep, err := client.Replicate(ctx, e.dbURL(tgt.Name(), true), e.dbURL(src.Name(), true))
	must(t, err, "Replicate")
	t.Cleanup(func() { _ = rep.Delete(testCtx(t)) })
	deadline := time.Now().Add(25 * time.Second)
	for rep.IsActive() && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		if err := rep.Update(ctx); err != nil {
			t.Fatalf("Replication.Update: %v", err)
		}
	}
	if rep.State() != kivik.ReplicationComplete {
		t.Fatalf("replication state %q (err %v), want completed", rep.State(), rep.Err())
	}
	stats, err := tgt.Stats(ctx)
	must(t, err, "target Stats")
	if stats.DocCount != 3 {
		t.Errorf("target has %d docs after replication, want 3", stats.DocCount)
	}
	var r2 map[string]any
	must(t, tgt.Get(ctx, "r2").ScanDoc(&r2), "Get replicated r2")
	if r2["v"] != "r2" {
		t.Errorf("replicated r2 = %v", r2)
	}
}

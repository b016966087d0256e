//! A node without HTTP: started on a fresh directory, it writes documents through the one
//! write path with its rules (validation, design documents, the users database, replication
//! ownership, per-user databases) and shows them through its read rules.

use std::sync::Arc;

use serde_json::{json, Value};
use settee_auth::User;
use settee_db::{Database, Durability, EditMode, NewDoc};
use settee_node::{Error, Node, NodeOptions, Visibility, REPLICATOR};

fn start(dir: &std::path::Path) -> Arc<Node> {
    let opts = NodeOptions {
        data_dir: dir.join("data"),
        config_path: dir.join("settee.ini"),
        release_memory: None,
        on_config: None,
        request_threads: 2,
    };
    let started = Node::start(&opts, Some("root:secret".into())).expect("node starts");
    assert!(
        started.generated_admin.is_none(),
        "the admin came from the argument"
    );
    started.node
}

fn doc(node: &Node, body: Value) -> NewDoc {
    NewDoc::from_json(body, None, || node.new_uuid(), &node.limits).expect("a document")
}

async fn write(
    node: &Arc<Node>,
    user: Option<&User>,
    db: &Arc<Database>,
    body: Value,
) -> settee_node::Result<settee_json::Rev> {
    let d = doc(node, body);
    node.update_doc(user, db, d, EditMode::Interactive, Durability::Durable)
        .await
}

fn read(db: &Database, id: &str) -> Value {
    let body = db
        .snapshot()
        .open_doc(id, None, &settee_db::DocOptions::default())
        .expect("stored");
    serde_json::from_slice(&body).unwrap()
}

fn user(name: &str) -> User {
    User {
        name: name.into(),
        roles: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_path_applies_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    let admin = User::admin("root");
    let bob = user("bob");
    // The system databases exist, for server admins only.
    for system in ["_users", REPLICATOR] {
        let db = node.catalog.get(system).expect("system database");
        assert!(settee_node::security::check_member(Some(&bob), &db).is_err());
    }
    let db = node.catalog.create("notes", None).unwrap();

    // Design documents: database admins only, and their functions must compile.
    let ddoc = json!({"_id": "_design/v", "validate_doc_update":
        "function(n, o, u) { if (!n.ok) throw({forbidden: 'not ok'}); if (n.boom) throw({boom: 'bang'}); }"});
    let refused = write(&node, Some(&bob), &db, ddoc.clone())
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)), "{refused:?}");
    let broken = json!({"_id": "_design/b", "views": {"v": {"map": "function(doc) {"}}});
    let refused = write(&node, Some(&admin), &db, broken).await.unwrap_err();
    assert!(matches!(refused, Error::Compilation(_)), "{refused:?}");
    write(&node, Some(&admin), &db, ddoc)
        .await
        .expect("an admin writes the design document");

    // validate_doc_update runs on every normal document, with the caller's context.
    let refused = write(&node, Some(&bob), &db, json!({"_id": "a"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::Forbidden(r) if r == "not ok"),
        "{refused:?}"
    );
    let refused = write(
        &node,
        Some(&bob),
        &db,
        json!({"_id": "b", "ok": 1, "boom": 1}),
    )
    .await
    .unwrap_err();
    // Any other exception refuses the write too, as an error of the function's own.
    assert!(
        matches!(&refused, Error::Refused { reason, .. } if reason.contains("bang")),
        "{refused:?}"
    );
    write(&node, Some(&bob), &db, json!({"_id": "c", "ok": 1}))
        .await
        .unwrap();
    // A refused document in a batch refuses only itself.
    let batch = vec![
        doc(&node, json!({"_id": "d"})),
        doc(&node, json!({"_id": "e", "ok": 1})),
    ];
    let answers = node
        .update_docs(
            Some(&bob),
            &db,
            batch,
            EditMode::Interactive,
            Durability::Durable,
        )
        .await
        .unwrap();
    assert!(answers[0].is_err() && answers[1].is_ok(), "{answers:?}");
    assert_eq!(
        db.snapshot().counts().unwrap().live,
        3,
        "_design/v, c and e"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_replication_documents_and_peruser_databases() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    node.config
        .write()
        .unwrap()
        .set("couch_peruser", "enable", "true")
        .unwrap();
    node.apply_config();
    let users = node.catalog.get("_users").unwrap();
    let bob = user("bob");

    // Anyone may sign up; the password is stored hashed; the private database appears.
    let signup = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user",
        "roles": [], "password": "pw"});
    write(&node, None, &users, signup).await.expect("sign-up");
    let stored = read(&users, "org.couchdb.user:bob");
    assert!(stored.get("password").is_none() && stored["derived_key"].is_string());
    let private = node
        .catalog
        .get(&settee_node::peruser_db_name("userdb-", "bob"))
        .unwrap();
    assert!(settee_node::security::is_db_admin(Some(&bob), &private).unwrap());
    // Others may not write bob's document, and see it only as its public fields allow.
    let eve = user("eve");
    let refused = write(
        &node,
        Some(&eve),
        &users,
        json!({"_id": "org.couchdb.user:bob"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(refused, Error::NotFound(_)), "{refused:?}");
    let seen = node.visibility(Some(&eve), &users).unwrap();
    assert_eq!(seen, Visibility::Users);
    // Only plain reads of the current revision can be filtered; listings are closed.
    assert!(matches!(seen.check_read(false), Err(Error::Forbidden(_))));
    assert!(seen.check_read(true).is_ok() && Visibility::Whole.check_read(false).is_ok());
    for (db, endpoint, closed) in [
        ("_users", "_all_docs", true),
        ("_users", "_find", true),
        (REPLICATOR, "_changes", true),
        ("_users", "_design", false),
        ("_users", "_security", false),
        ("notes", "_all_docs", false),
    ] {
        assert_eq!(
            node.closes_endpoint(db, endpoint),
            closed,
            "{db}/{endpoint}"
        );
    }
    let body = serde_json::to_vec(&stored).unwrap();
    let hidden = node.visible_doc(seen, Some(&eve), "org.couchdb.user:bob", body.clone());
    assert!(matches!(hidden, Err(Error::NotFound(_))), "{hidden:?}");
    let own = node.visibility(Some(&bob), &users).unwrap();
    let whole = node
        .visible_doc(own, Some(&bob), "org.couchdb.user:bob", body)
        .unwrap();
    // Their own document whole, but for the credentials, which only admins ever see.
    let whole: Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(
        (&whole["name"], &whole["_rev"]),
        (&stored["name"], &stored["_rev"])
    );
    assert!(whole.get("derived_key").is_none() && whole.get("salt").is_none());

    // Replication documents become their writer's; others read them without credentials.
    let rep = node.catalog.get(REPLICATOR).unwrap();
    rep.update_meta(|m| m.security = Vec::new()).await.unwrap();
    let job = json!({"_id": "j", "source": "http://bob:pw@a/db", "target": "b"});
    write(&node, Some(&bob), &rep, job).await.unwrap();
    let stored = read(&rep, "j");
    assert_eq!(stored["owner"], "bob");
    let refused = write(
        &node,
        Some(&eve),
        &rep,
        json!({"_id": "j", "_rev": stored["_rev"]}),
    )
    .await
    .unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)), "{refused:?}");
    let seen = node.visibility(Some(&eve), &rep).unwrap();
    let shown = node
        .visible_doc(seen, Some(&eve), "j", serde_json::to_vec(&stored).unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&shown).unwrap()["source"],
        "http://a/db"
    );
}

#[test]
fn configuration_changes_follow_couchdbs_rules() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path());
    // Admin passwords are stored hashed; the old value comes back.
    assert_eq!(node.set_config("admins", "ann", "pw", true).unwrap(), None);
    let stored = node
        .config
        .read()
        .unwrap()
        .get("admins", "ann")
        .unwrap()
        .to_string();
    assert!(stored.starts_with("-pbkdf2"), "{stored}");
    // A change takes effect at once: the users database moves.
    node.set_config("chttpd_auth", "authentication_db", "people", false)
        .unwrap();
    assert!(node.is_users_db("people") && !node.is_users_db("_users"));
    // Sections that may not change live, and keys or values the file could not hold.
    for (section, key, value) in [
        ("query_servers", "python", "/bin/sh"),
        ("a b", "k", "v"),
        ("s", "k=1", "v"),
        ("s", "k", "two\nlines"),
    ] {
        let refused = node.set_config(section, key, value, false).unwrap_err();
        assert!(
            matches!(refused, Error::Forbidden(_) | Error::BadRequest(_)),
            "{section}/{key}: {refused:?}"
        );
    }
    let missing = node.delete_config("s", "nothing", false).unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing:?}");
    assert_eq!(
        node.delete_config("chttpd_auth", "authentication_db", false)
            .unwrap()
            .as_deref(),
        Some("people")
    );
    assert!(node.is_users_db("_users"));
    // Reloading forgets what was never written to the file.
    node.set_config("s", "k", "memory", false).unwrap();
    node.reload_config().unwrap();
    assert_eq!(node.config.read().unwrap().get("s", "k"), None);
}

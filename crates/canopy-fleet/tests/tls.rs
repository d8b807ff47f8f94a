//! TLS to the fleet database, against a real PostgreSQL with `ssl = on`
//! and certificates made here (a CA, a server certificate for
//! `localhost`, and an unrelated CA). The server accepts only TLS
//! sessions with a SCRAM password (`hostssl … scram-sha-256`), so every
//! connection that succeeds below was encrypted and authenticated by
//! password; `channel_binding=require` proves the connector's
//! `tls-server-end-point` binding is right.

mod common;

use canopy_fleet::{Fleet, FleetConfig, FleetError, migrate};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).expect("CA certificate");
    Ca {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// A server certificate for `names`, signed by `ca`: (certificate PEM, key PEM).
fn server_cert(ca: &Ca, names: &[&str]) -> (String, String) {
    let key = KeyPair::generate().expect("server key");
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("server params");
    params
        .distinguished_name
        .push(DnType::CommonName, "canopy test server");
    let cert = params
        .signed_by(&key, &ca.issuer)
        .expect("server certificate");
    (cert.pem(), key.serialize_pem())
}

fn config(url: String) -> FleetConfig {
    let mut c = FleetConfig::new(url, "tls-node", "http://127.0.0.1:1");
    c.timing = common::timing();
    c
}

fn config_error(e: FleetError) -> String {
    assert!(
        matches!(e, FleetError::Config(_)) && !e.is_retryable(),
        "a configuration error, not retried: {e:?}"
    );
    e.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_and_verify_full_reach_a_tls_server_and_a_wrong_ca_is_refused() {
    let Some(mut pg) = common::pg() else { return };
    let port = pg.port();
    let url = |host: &str, query: &str| {
        format!("postgres://canopy:s3cret@{host}:{port}/postgres?{query}")
    };

    // TLS off on the server: `require` is refused with an error naming it;
    // `prefer` (libpq's default) falls back to a plain session.
    let e = migrate(&config(url("127.0.0.1", "sslmode=require")))
        .await
        .unwrap_err();
    let e = config_error(e);
    assert!(
        e.contains("does not accept TLS") && e.contains("sslmode=require"),
        "{e}"
    );
    migrate(&config(url("127.0.0.1", "sslmode=prefer")))
        .await
        .expect("prefer connects without TLS");
    common::raw(&pg)
        .await
        .batch_execute(
            "SET password_encryption = 'scram-sha-256'; ALTER ROLE canopy PASSWORD 's3cret'",
        )
        .await
        .expect("password set");

    // TLS on; only TLS sessions with a password are accepted.
    let good = ca("canopy test CA");
    let wrong = ca("another CA");
    let (cert, key) = server_cert(&good, &["localhost"]);
    pg.enable_tls(
        &cert,
        &key,
        "hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n",
    )
    .expect("server restarted with ssl = on");
    let dir = tempfile::tempdir().unwrap();
    let good_pem = dir.path().join("ca.pem");
    let wrong_pem = dir.path().join("wrong-ca.pem");
    std::fs::write(&good_pem, &good.pem).unwrap();
    std::fs::write(&wrong_pem, &wrong.pem).unwrap();
    let (good_pem, wrong_pem) = (good_pem.display(), wrong_pem.display());

    // A plain session is refused by the server itself.
    let e = migrate(&config(url("127.0.0.1", "sslmode=disable")))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no encryption"), "{e}");

    // require: encrypted, the certificate not checked.
    migrate(&config(url("127.0.0.1", "sslmode=require")))
        .await
        .expect("sslmode=require");
    // verify-full: signed by the CA given and issued for the host named,
    // with SCRAM channel binding required.
    migrate(&config(url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={good_pem}&channel_binding=require"),
    )))
    .await
    .expect("sslmode=verify-full");
    // verify-ca checks the chain only: an address the certificate does
    // not name is accepted …
    migrate(&config(url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={good_pem}"),
    )))
    .await
    .expect("sslmode=verify-ca");
    // … and refused by verify-full.
    let e = migrate(&config(url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={good_pem}"),
    )))
    .await
    .unwrap_err();
    let e = config_error(e);
    assert!(
        e.contains("not issued for host \"127.0.0.1\"") && e.contains("sslmode=verify-full"),
        "{e}"
    );

    // The wrong CA: a node does not start, at once, and says which setting.
    let e = Fleet::start(config(url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={wrong_pem}"),
    )))
    .await
    .map(|_| ())
    .unwrap_err();
    let e = config_error(e);
    assert!(
        e.contains(&format!(
            "not signed by a CA certificate in sslrootcert={wrong_pem}"
        )),
        "{e}"
    );
    // A root file that is not there.
    let e = migrate(&config(url(
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    )))
    .await
    .unwrap_err();
    let e = config_error(e);
    assert!(e.contains("sslrootcert=/nonexistent/ca.pem"), "{e}");

    // A whole node over verify-full: its request pool, heartbeat and event
    // listener all connect, and it takes the lease of a repository.
    let node = common::Node::start(config(url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={good_pem}&channel_binding=require"),
    )))
    .await;
    node.fleet
        .add_repo(&common::git_repo(1))
        .await
        .expect("repository added over TLS");
    assert!(
        common::wait_for(|| {
            let h = node.fleet.health();
            h.database.connected && h.event_listener && node.owned().len() == 1
        })
        .await,
        "the node works over TLS: {:?}",
        node.fleet.health()
    );
    node.fleet.shutdown().await.expect("shutdown");
}

/// A client certificate for database user `user`, signed by `ca`:
/// (certificate PEM, key PEM).
fn client_cert(ca: &Ca, user: &str) -> (String, String) {
    let key = KeyPair::generate().expect("client key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
    params.distinguished_name.push(DnType::CommonName, user);
    let cert = params
        .signed_by(&key, &ca.issuer)
        .expect("client certificate");
    (cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_authenticates_by_client_certificate_admits_a_node_with_sslcert() {
    let Some(mut pg) = common::pg() else { return };
    let port = pg.port();
    // No password anywhere: the certificate is the only credential.
    let url = |query: &str| format!("postgres://canopy@localhost:{port}/postgres?{query}");
    let server_ca = ca("canopy test CA");
    let client_ca = ca("canopy client CA");
    let stranger_ca = ca("a CA the server does not trust");
    let (cert, key) = server_cert(&server_ca, &["localhost"]);
    pg.enable_tls(&cert, &key, "hostssl all all 127.0.0.1/32 trust\n")
        .expect("server restarted with ssl = on");
    pg.trust_client_certs(
        &client_ca.pem,
        "hostssl all all 127.0.0.1/32 cert\nhostssl all all ::1/128 cert\n",
    )
    .expect("server restarted trusting the client CA");

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let server_ca_pem = write("ca.pem", &server_ca.pem);
    let (good_cert, good_key) = client_cert(&client_ca, "canopy");
    let (good_cert, good_key) = (write("node.crt", &good_cert), write("node.key", &good_key));
    let (other_cert, other_key) = client_cert(&client_ca, "somebody-else");
    let (other_cert, other_key) = (
        write("other.crt", &other_cert),
        write("other.key", &other_key),
    );
    let (stray_cert, stray_key) = client_cert(&stranger_ca, "canopy");
    let (stray_cert, stray_key) = (
        write("stray.crt", &stray_cert),
        write("stray.key", &stray_key),
    );
    let verify = format!("sslmode=verify-full&sslrootcert={server_ca_pem}");

    // The node's certificate, for the user it connects as: admitted.
    migrate(&config(url(&format!(
        "{verify}&sslcert={good_cert}&sslkey={good_key}"
    ))))
    .await
    .expect("a node with its client certificate is admitted");

    let refused = |query: String| {
        let config = config(url(&query));
        async move { migrate(&config).await.unwrap_err().to_string() }
    };
    // Without a certificate the server refuses, and says why.
    let e = refused(verify.clone()).await;
    assert!(e.contains("certificate"), "{e}");
    // A certificate for another user: refused by the server.
    let e = refused(format!("{verify}&sslcert={other_cert}&sslkey={other_key}")).await;
    assert!(e.contains("certificate"), "{e}");
    // A certificate from a CA the server does not trust: refused in TLS.
    let e = refused(format!("{verify}&sslcert={stray_cert}&sslkey={stray_key}")).await;
    assert!(e.contains(&format!("sslcert={stray_cert}")), "{e}");
    // A key file that is not there: a configuration error naming it, at once.
    let e = migrate(&config(url(&format!(
        "{verify}&sslcert={good_cert}&sslkey=/nonexistent/node.key"
    ))))
    .await
    .unwrap_err();
    let e = config_error(e);
    assert!(e.contains("sslkey=/nonexistent/node.key"), "{e}");
}

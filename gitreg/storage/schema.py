"""The SQLite schema, as an ordered list of named migrations (0022 on: schema_search.py).

Each runs once, in its own transaction (the `migrations` table records the names applied),
so an interrupted upgrade is retried whole. New ones go at the end; a name is never reused."""

from __future__ import annotations

from gitreg.storage.schema_search import SEARCH_MIGRATIONS

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001-modules",
        """
    CREATE TABLE repos (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL UNIQUE,
        forge_repo TEXT NOT NULL DEFAULT '',
        webhook_secret TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        last_fetch_at TEXT,
        last_fetch_error TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX repos_forge_repo ON repos(lower(forge_repo));
    CREATE TABLE modules (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        system TEXT NOT NULL,
        address_key TEXT NOT NULL UNIQUE,
        subdir TEXT NOT NULL DEFAULT '',
        tag_prefix TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        last_sync_at TEXT,
        sync_report TEXT NOT NULL DEFAULT '[]'
    );
    CREATE TABLE module_versions (
        id INTEGER PRIMARY KEY,
        module_id INTEGER NOT NULL REFERENCES modules(id),
        version TEXT NOT NULL,
        version_key TEXT NOT NULL,
        tag TEXT NOT NULL,
        tag_sha TEXT NOT NULL,
        commit_sha TEXT NOT NULL,
        tree_sha TEXT NOT NULL,
        archive_sha256 TEXT NOT NULL,
        archive_size INTEGER NOT NULL,
        published_at TEXT NOT NULL,
        yanked INTEGER NOT NULL DEFAULT 0,
        UNIQUE (module_id, version_key)
    );
    CREATE TABLE module_conflicts (
        id INTEGER PRIMARY KEY,
        module_id INTEGER NOT NULL REFERENCES modules(id),
        version TEXT NOT NULL,
        tag TEXT NOT NULL,
        published_commit TEXT NOT NULL,
        seen_commit TEXT NOT NULL,
        reason TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        UNIQUE (module_id, tag, seen_commit)
    );
    CREATE TABLE archives (
        tree_sha TEXT NOT NULL,
        mtime INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        PRIMARY KEY (tree_sha, mtime)
    );
    """,
    ),
    (
        # Ingestion jobs (issue 3). Times are Unix seconds (REAL) so leases and
        # backoff compare with plain arithmetic. At most one queued job per
        # repository: later deliveries fold into it (one sync covers them all).
        "0002-jobs",
        """
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        source TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        deliveries INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        run_after REAL NOT NULL,
        lease_owner TEXT NOT NULL DEFAULT '',
        lease_until REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        last_error TEXT NOT NULL DEFAULT '',
        result TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX jobs_state ON jobs(state, run_after);
    CREATE INDEX jobs_repo ON jobs(repo_id, state);
    CREATE UNIQUE INDEX jobs_one_queued_per_repo ON jobs(repo_id) WHERE state = 'queued';
    CREATE TABLE deliveries (
        source TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        received_at REAL NOT NULL,
        PRIMARY KEY (source, delivery_id, repo_id)
    );
    CREATE INDEX deliveries_job ON deliveries(job_id);
    CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        next_run REAL NOT NULL
    );
    """,
    ),
    (
        # Providers (issue 4, docs/providers.md). A version is immutable once
        # recorded (checklist P2); `key_id` names the key that signed its
        # SHA256SUMS, so a rotated key stays served for the versions it signed (P3).
        "0003-providers",
        """
    CREATE TABLE providers (
        id INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        type TEXT NOT NULL,
        address_key TEXT NOT NULL UNIQUE,
        repo_id INTEGER REFERENCES repos(id),
        forge TEXT NOT NULL DEFAULT '',
        sign_releases INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        last_sync_at TEXT,
        last_sync_report TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX providers_repo ON providers(repo_id);
    CREATE TABLE provider_keys (
        id INTEGER PRIMARY KEY,
        namespace_key TEXT NOT NULL,
        key_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        ascii_armor TEXT NOT NULL,
        algorithms TEXT NOT NULL,
        terraform_compatible INTEGER NOT NULL,
        origin TEXT NOT NULL,
        created_at TEXT NOT NULL,
        retired_at TEXT,
        UNIQUE (namespace_key, fingerprint)
    );
    CREATE TABLE provider_versions (
        id INTEGER PRIMARY KEY,
        provider_id INTEGER NOT NULL REFERENCES providers(id),
        version TEXT NOT NULL,
        protocols TEXT NOT NULL,
        shasums_filename TEXT NOT NULL,
        shasums_sha256 TEXT NOT NULL,
        signature_sha256 TEXT NOT NULL,
        key_id INTEGER NOT NULL REFERENCES provider_keys(id),
        signed_by TEXT NOT NULL,
        source TEXT NOT NULL,
        published_at TEXT NOT NULL,
        UNIQUE (provider_id, version)
    );
    CREATE TABLE provider_packages (
        version_id INTEGER NOT NULL REFERENCES provider_versions(id),
        os TEXT NOT NULL,
        arch TEXT NOT NULL,
        filename TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        h1 TEXT NOT NULL,
        PRIMARY KEY (version_id, os, arch)
    );
    """,
    ),
    (
        # API tokens and namespace visibility (issue 6); SQL in storage/auth.py.
        "0010-auth",
        """
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            prefix TEXT NOT NULL,
            scope TEXT NOT NULL,
            namespaces TEXT NOT NULL DEFAULT '[]',
            description TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            expires_at REAL,
            revoked_at TEXT
        );
        CREATE TABLE namespace_access (
            namespace_key TEXT PRIMARY KEY,
            namespace TEXT NOT NULL,
            private INTEGER NOT NULL
        );
        """,
    ),
    (
        # Provider network mirror (issue 5, docs/mirror.md; SQL in storage/mirror.py).
        # An upstream's last good version list, kept for stale-if-error (checklist
        # M3), and every package that passed verification. A package row is never
        # replaced (M4); its zip is the blob `sha256`.
        "0004-mirror",
        """
    CREATE TABLE mirror_indexes (
        provider_key TEXT PRIMARY KEY,
        hostname TEXT NOT NULL,
        namespace TEXT NOT NULL,
        type TEXT NOT NULL,
        versions TEXT NOT NULL,
        fetched_at REAL NOT NULL
    );
    CREATE TABLE mirror_packages (
        provider_key TEXT NOT NULL,
        version TEXT NOT NULL,
        platform TEXT NOT NULL,
        filename TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        h1 TEXT NOT NULL,
        protocols TEXT NOT NULL,
        key_id TEXT NOT NULL,
        source_url TEXT NOT NULL,
        fetched_at REAL NOT NULL,
        PRIMARY KEY (provider_key, version, platform)
    );
    CREATE INDEX mirror_packages_sha256 ON mirror_packages(sha256);
    """,
    ),
    (
        # `gitreg repo remove --keep-versions` (docs/modules.md): the repository
        # stops syncing and is hidden from listings and webhooks, but its row stays
        # because the modules whose versions keep serving still reference it.
        "0011-repos-removed-at",
        """
    ALTER TABLE repos ADD COLUMN removed_at TEXT;
    """,
    ),
    (
        # Secrets shared by every replica (issue 12; SQL in storage/secrets.py):
        # URL-signing keys and provider key secrets, sealed with the operator's
        # key (AES-256-GCM, base64 TEXT so the same SQL runs on PostgreSQL).
        # A row's `version` comes from the one-row `secret_versions`, bumped by
        # every write, so a replica notices a rotation by reading one small row.
        "0012-secrets",
        """
    CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        key_id TEXT NOT NULL,
        sealed TEXT NOT NULL,
        version INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE secret_versions (
        id INTEGER PRIMARY KEY,
        last_version INTEGER NOT NULL
    );
    INSERT INTO secret_versions (id, last_version) VALUES (1, 0);
    """,
    ),
    (
        # `gitreg provider yank|unyank` (issue 15): a yanked provider version
        # leaves the version lists but its files keep serving by exact version,
        # as module versions do through module_versions.yanked.
        "0013-provider-yank",
        """
    ALTER TABLE provider_versions ADD COLUMN yanked INTEGER NOT NULL DEFAULT 0;
    """,
    ),
    (
        # Documentation extracted at publish (issue 13; SQL in storage/catalog.py):
        # one immutable JSON document per version, and one search row per module
        # (its latest version's words). Search is FTS5 on SQLite and a tsvector
        # with a GIN index on PostgreSQL (core, no extension); statements marked
        # /*sqlite*/ or /*postgresql*/ run on that engine only (migrations.py).
        "0014-module-docs",
        """
    CREATE TABLE module_docs (
        module_id INTEGER NOT NULL REFERENCES modules(id),
        version_key TEXT NOT NULL,
        format INTEGER NOT NULL,
        document TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (module_id, version_key)
    );
    CREATE TABLE module_search (
        module_id INTEGER PRIMARY KEY REFERENCES modules(id),
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        system TEXT NOT NULL,
        description TEXT NOT NULL,
        body TEXT NOT NULL
    );
    /*sqlite*/ CREATE VIRTUAL TABLE module_search_fts USING fts5(
        namespace, name, system, description, body, tokenize = 'unicode61'
    );
    /*sqlite*/ INSERT INTO module_search_fts (module_search_fts, rank)
        VALUES ('rank', 'bm25(4.0, 10.0, 4.0, 2.0, 1.0)');
    CREATE INDEX module_search_name ON module_search (lower(name));
    /*postgresql*/ ALTER TABLE module_search ADD COLUMN terms tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', namespace || ' ' || name || ' ' || system), 'A')
        || setweight(to_tsvector('simple', description), 'B')
        || setweight(to_tsvector('simple', body), 'C')
    ) STORED;
    /*postgresql*/ CREATE INDEX module_search_terms ON module_search USING GIN (terms);
    """,
    ),
    (
        # Pull-through cache of public modules (issue 17; SQL in
        # storage/module_proxy.py, docs/module-proxy.md). A cached version row
        # is immutable: the first archive fetched for it is served forever, and
        # an upstream tag later found elsewhere is recorded in
        # module_proxy_moves, as module_conflicts does for own modules (G4).
        "0015-module-proxy",
        """
    CREATE TABLE module_proxy_indexes (
        module_key TEXT PRIMARY KEY,
        versions TEXT NOT NULL,
        fetched_at REAL NOT NULL
    );
    CREATE TABLE module_proxy_versions (
        module_key TEXT NOT NULL,
        version TEXT NOT NULL,
        host TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        system TEXT NOT NULL,
        location TEXT NOT NULL,
        git_url TEXT NOT NULL,
        ref TEXT NOT NULL,
        subdir TEXT NOT NULL,
        commit_sha TEXT NOT NULL,
        archive_sha256 TEXT NOT NULL,
        archive_size INTEGER NOT NULL,
        fetched_at REAL NOT NULL,
        PRIMARY KEY (module_key, version)
    );
    CREATE TABLE module_proxy_moves (
        module_key TEXT NOT NULL,
        version TEXT NOT NULL,
        ref TEXT NOT NULL,
        cached_commit TEXT NOT NULL,
        upstream_commit TEXT NOT NULL,
        first_seen REAL NOT NULL,
        PRIMARY KEY (module_key, version, upstream_commit)
    );
    """,
    ),
    (
        # Provider documentation (issue 13; SQL in storage/provider_docs.py): a
        # version's listing of pages and each page's HTML, written once at
        # ingest. Download counts (SQL in storage/download_counts.py): per
        # version and UTC day, and per token when the request carried one
        # (token_id 0 otherwise). Flushes add to a row (upsert), so several
        # workers and replicas count into the same rows. The key is a unique
        # index, not a primary key, so issue 14's per-person and per-group
        # counts are an added column and a rebuilt index.
        # Search ranks by the short columns only (module_search_head on
        # SQLite, head_terms on PostgreSQL): ranking the README text of every
        # match cost 15-28 ms at 10,000 modules (docs/performance.md).
        "0016-provider-docs-downloads",
        """
    CREATE TABLE provider_doc_sets (
        version_id INTEGER NOT NULL REFERENCES provider_versions(id),
        format INTEGER NOT NULL,
        listing TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (version_id)
    );
    CREATE TABLE provider_doc_pages (
        version_id INTEGER NOT NULL REFERENCES provider_versions(id),
        doc_id TEXT NOT NULL,
        html TEXT NOT NULL,
        PRIMARY KEY (version_id, doc_id)
    );
    CREATE TABLE download_counts (
        kind TEXT NOT NULL,
        object_id INTEGER NOT NULL,
        version TEXT NOT NULL,
        day TEXT NOT NULL,
        token_id INTEGER NOT NULL,
        downloads INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX download_counts_key
        ON download_counts (kind, object_id, version, day, token_id);
    CREATE TABLE download_totals (
        kind TEXT NOT NULL,
        object_id INTEGER NOT NULL,
        version TEXT NOT NULL,
        downloads INTEGER NOT NULL,
        PRIMARY KEY (kind, object_id, version)
    );
    /*sqlite*/ CREATE VIRTUAL TABLE module_search_head USING fts5(
        namespace, name, system, description, tokenize = 'unicode61'
    );
    /*sqlite*/ INSERT INTO module_search_head (module_search_head, rank)
        VALUES ('rank', 'bm25(4.0, 10.0, 4.0, 2.0)');
    /*sqlite*/ INSERT INTO module_search_head (rowid, namespace, name, system, description)
        SELECT module_id, namespace, name, system, description FROM module_search;
    /*postgresql*/ ALTER TABLE module_search ADD COLUMN head_terms tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', namespace || ' ' || name || ' ' || system), 'A')
        || setweight(to_tsvector('simple', description), 'B')
    ) STORED;
    /*postgresql*/ CREATE INDEX module_search_head_terms ON module_search USING GIN (head_terms);
    """,
    ),
    (
        # Issue 16 (docs/performance.md "Publishing", docs/modules.md "Monorepos"):
        # - every archive records the builder that made its bytes
        #   (gitreg/archives/format.py); archives before this were all zlib level 6;
        # - a module can have an archive of its own directory only
        #   (archive_scope 'subdir'), built once per subtree: a tag that leaves the
        #   module's directory unchanged reuses the archive (subtree_archives);
        # - `repo add --modules GLOB` registers the glob, so directories that appear
        #   under it later are registered by the next sync (module_globs).
        "0017-archive-builders-and-module-globs",
        """
    ALTER TABLE archives ADD COLUMN builder TEXT NOT NULL DEFAULT 'tar-pax+zlib-6';
    ALTER TABLE modules ADD COLUMN archive_scope TEXT NOT NULL DEFAULT 'repository';
    CREATE TABLE subtree_archives (
        subtree_sha TEXT NOT NULL,
        subdir TEXT NOT NULL,
        mtime INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        builder TEXT NOT NULL,
        PRIMARY KEY (subtree_sha, subdir)
    );
    CREATE TABLE module_globs (
        repo_id INTEGER NOT NULL REFERENCES repos(id),
        pattern TEXT NOT NULL,
        namespace TEXT NOT NULL,
        system TEXT NOT NULL,
        tag_pattern TEXT NOT NULL,
        archive_scope TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (repo_id, pattern)
    );
    """,
    ),
    (
        # Issue 16, target 5: a repository's modules are read on every sync and
        # publish; with 10,000 modules that was a scan of the whole table.
        "0018-modules-repo-index",
        """
    CREATE INDEX modules_repo ON modules(repo_id);
    """,
    ),
    (
        # Sign-in (issue 14; SQL in storage/auth.py, docs/sign-in.md). A token
        # from `terraform login` records whose it is (the IdP's subject, email
        # and groups at sign-in) and its per-namespace scopes as JSON
        # {"namespace" or "*": scope}; NULL keeps an operator token's single
        # scope. `login_states` holds a sign-in in flight (the IdP round trip,
        # then the one-time code) in the database, so any replica can finish
        # it; a row is deleted when used, making it single-use on both engines.
        "0019-login",
        """
    ALTER TABLE api_tokens ADD COLUMN subject TEXT NOT NULL DEFAULT '';
    ALTER TABLE api_tokens ADD COLUMN email TEXT NOT NULL DEFAULT '';
    ALTER TABLE api_tokens ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE api_tokens ADD COLUMN grants TEXT;
    CREATE TABLE login_states (
        key TEXT PRIMARY KEY,
        payload TEXT NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX login_states_expires_at ON login_states(expires_at);
    """,
    ),
    (
        "0020-ui-sessions",
        # Web UI sessions (gitreg/ui/session.py): keyed by the sha256 of the
        # cookie's value, so the table never holds a usable session id.
        """
    CREATE TABLE ui_sessions (
        id_hash TEXT PRIMARY KEY,
        subject TEXT NOT NULL,
        email TEXT NOT NULL,
        groups TEXT NOT NULL,
        grants TEXT NOT NULL,
        csrf TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX ui_sessions_expires_at ON ui_sessions(expires_at);
    """,
    ),
    (
        # `gitreg module deprecate|undeprecate` (issue 14; SQL in storage/index.py,
        # docs/modules.md). A deprecated version stays listed and installable; its
        # reason (NULL: not deprecated) and optional link ride on its entry in
        # `/v1/modules/.../versions` as `deprecation: {reason, link}`, the shape
        # HashiCorp's registry clients read (go-slug sourcebundle's
        # ModulePackageVersionDeprecation).
        "0021-module-deprecation",
        """
    ALTER TABLE module_versions ADD COLUMN deprecation_reason TEXT;
    ALTER TABLE module_versions ADD COLUMN deprecation_link TEXT NOT NULL DEFAULT '';
    """,
    ),
    *SEARCH_MIGRATIONS,
]

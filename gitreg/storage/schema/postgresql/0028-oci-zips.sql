-- The zip layer of a module archive, served over OCI (gitreg/oci/).
CREATE TABLE oci_module_zips (
    archive TEXT PRIMARY KEY, -- the sha256 of the registry archive it is built from
    zip_sha256 TEXT NOT NULL,
    zip_size BIGINT NOT NULL,
    builder TEXT NOT NULL,
    built_at DOUBLE PRECISION NOT NULL
);

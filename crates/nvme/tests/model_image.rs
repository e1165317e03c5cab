//! The controller model's image file: header checks, explicit creation, the lock,
//! read-only opening (a write-protected namespace), creation that a crash at any step
//! leaves absent or valid, and a property test that no damage to the header panics or goes
//! unnoticed.
//!
//! Case counts are CI-sized by default. `PROPTEST_CASES=N` sets every property's count;
//! `BAM_FUZZ_SCALE=K` multiplies the defaults.

use bam_nvme::device::DeviceSpec;
use bam_nvme::model::medium::{CreationHook, CREATION_STEPS};
use bam_nvme::model::{
    FileMedium, ImageHeader, ImageOptions, ImageProblem, ModelConfig, IMAGE_HEADER_BYTES,
};
use bam_nvme::spec::status::GenericStatus;
use bam_nvme::{Controller, ControllerOptions, Error, Transport};
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;

#[path = "support/cases.rs"]
mod support_cases;
use support_cases::cases;

fn controller(t: Arc<dyn Transport>) -> Controller {
    Controller::new(t, ControllerOptions::default()).unwrap()
}

fn image_problem<T>(r: bam_nvme::Result<T>) -> ImageProblem {
    match r {
        Err(Error::ModelImage { problem, .. }) => problem,
        Err(e) => panic!("not an image error: {e}"),
        Ok(_) => panic!("opened"),
    }
}

fn spec(s: &str) -> DeviceSpec {
    s.parse().unwrap()
}

fn dev(dir: &Path, name: &str, opts: &str) -> DeviceSpec {
    spec(&format!("model:{}{opts}", dir.join(name).display()))
}

#[test]
fn a_missing_image_is_created_only_with_size() {
    let dir = tempfile::tempdir().unwrap();
    let e = dev(dir.path(), "typo.img", "")
        .open_transport()
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::ModelImage { problem: ImageProblem::Missing, path } if path.ends_with("typo.img")),
        "{e}"
    );
    assert!(e.to_string().contains("size="), "{e}");
    let e = dev(dir.path(), "typo.img", ",lba=4K")
        .open_transport_read_only()
        .err()
        .unwrap();
    assert!(matches!(
        e,
        Error::ModelImage {
            problem: ImageProblem::Missing,
            ..
        }
    ));
    assert!(!dir.path().join("typo.img").exists());

    let t = dev(dir.path(), "new.img", ",size=1M,lba=4K")
        .open_transport()
        .unwrap();
    assert_eq!(controller(t).namespace(1).unwrap().blocks, 256);
    assert_eq!(
        std::fs::metadata(dir.path().join("new.img")).unwrap().len(),
        IMAGE_HEADER_BYTES + (1 << 20)
    );
    // Reopened without options: the image's own geometry (4 KiB blocks, not 512).
    let ns = controller(dev(dir.path(), "new.img", "").open_transport().unwrap())
        .namespace(1)
        .unwrap();
    assert_eq!((ns.blocks, ns.block_size), (256, 4096));
}

#[test]
fn geometry_given_must_match_the_image() {
    let dir = tempfile::tempdir().unwrap();
    drop(
        dev(dir.path(), "g.img", ",size=1M")
            .open_transport()
            .unwrap(),
    );
    let e = dev(dir.path(), "g.img", ",lba=4096")
        .open_transport()
        .err()
        .unwrap();
    assert_eq!(
        image_problem::<()>(Err(e)),
        ImageProblem::LbaMismatch {
            image: 512,
            asked: 4096
        }
    );
    let e = dev(dir.path(), "g.img", ",size=2M")
        .open_transport_read_only()
        .err()
        .unwrap();
    assert_eq!(
        image_problem::<()>(Err(e)),
        ImageProblem::CapacityMismatch {
            image: 1 << 20,
            asked: 2 << 20
        }
    );
    // Matching options open it.
    dev(dir.path(), "g.img", ",size=1M,lba=512")
        .open_transport()
        .unwrap();
}

#[test]
fn a_raw_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("raw.img");
    let data: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&p, &data).unwrap();
    for s in ["", ",size=1M", ",size=2M,lba=4K"] {
        let e = dev(dir.path(), "raw.img", s)
            .open_transport()
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                Error::ModelImage {
                    problem: ImageProblem::NotAnImage { len: 1048576 },
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("bam load"), "{e}");
    }
    assert!(std::fs::read(&p).unwrap() == data);
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let w = dev(dir.path(), "l.img", ",size=1M")
        .open_transport()
        .unwrap();
    let e = dev(dir.path(), "l.img", "").open_transport().err().unwrap();
    assert!(
        matches!(
            e,
            Error::ModelImage {
                problem: ImageProblem::InUse { .. },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("in use"), "{e}");
    let e = dev(dir.path(), "l.img", "")
        .open_transport_read_only()
        .err()
        .unwrap();
    assert_eq!(
        image_problem::<()>(Err(e)),
        ImageProblem::InUse { writer: true }
    );
    drop(w);
    // Readers share it; a writer waits for them.
    let r1 = dev(dir.path(), "l.img", "")
        .open_transport_read_only()
        .unwrap();
    let r2 = dev(dir.path(), "l.img", "")
        .open_transport_read_only()
        .unwrap();
    assert!(matches!(
        dev(dir.path(), "l.img", "").open_transport(),
        Err(Error::ModelImage {
            problem: ImageProblem::InUse { writer: false },
            ..
        })
    ));
    drop((r1, r2));
    dev(dir.path(), "l.img", "").open_transport().unwrap();
}

#[test]
fn a_read_only_model_is_a_write_protected_namespace() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ctrl = controller(
            dev(dir.path(), "ro.img", ",size=1M")
                .open_transport()
                .unwrap(),
        );
        let ns = ctrl.namespace(1).unwrap();
        ctrl.create_io_queue_pair(8)
            .unwrap()
            .write_from(&ns, 3, &[0x5A; 512])
            .unwrap();
    }
    let before = std::fs::read(dir.path().join("ro.img")).unwrap();
    let ctrl = controller(
        dev(dir.path(), "ro.img", "")
            .open_transport_read_only()
            .unwrap(),
    );
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let protected = |r: bam_nvme::Result<()>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        assert_eq!(
            e.status().and_then(|s| s.generic_code()),
            Some(GenericStatus::NamespaceWriteProtected),
            "{e}"
        );
        assert!(e.to_string().contains("Write Protected"), "{e}");
    };
    protected(qp.write_from(&ns, 3, &[1; 512]));
    protected(qp.write_zeroes(&ns, 0, 8));
    protected(qp.deallocate(&ns, &[(3, 1)]));
    // Reads and Flush go on; the queue pair is still usable after the refusals.
    let mut back = [0u8; 512];
    qp.read_into(&ns, 3, &mut back).unwrap();
    assert_eq!(back, [0x5A; 512]);
    qp.flush(&ns).unwrap();
    drop((qp, ctrl));
    assert!(std::fs::read(dir.path().join("ro.img")).unwrap() == before);
    // The same holds for a read-only RAM model.
    let ctrl = controller(spec("model:ram:1M").open_transport_read_only().unwrap());
    let ns = ctrl.namespace(1).unwrap();
    protected(
        ctrl.create_io_queue_pair(8)
            .unwrap()
            .write_from(&ns, 0, &[1; 512]),
    );
}

#[test]
fn the_model_takes_the_image_geometry() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.img");
    let mut cfg = ModelConfig::file(&p, 64 << 10);
    cfg.lba_size = 4096;
    drop(cfg.build().unwrap());
    let m = ModelConfig::open_file(&p).build().unwrap();
    assert_eq!((m.config().lba_size, m.blocks()), (4096, 16));
    drop(m);
    // ModelConfig::file checks the block size it is given against an existing image.
    assert_eq!(
        image_problem(ModelConfig::file(&p, 64 << 10).build()),
        ImageProblem::LbaMismatch {
            image: 4096,
            asked: 512
        }
    );
    // A new image must be a whole number of blocks.
    assert!(matches!(
        ModelConfig::file(dir.path().join("odd.img"), 1000).build(),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!dir.path().join("odd.img").exists());
}

fn valid_image() -> (ImageHeader, Vec<u8>) {
    let h = ImageHeader {
        lba_size: 512,
        blocks: 8,
    };
    let mut bytes = h.encode();
    bytes.resize(h.file_bytes().unwrap() as usize, 0);
    (h, bytes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(2048)))]

    /// Any change to a header's bytes, or to the file's length, is a typed problem; only the
    /// untouched image decodes.
    #[test]
    fn damaged_headers_decode_to_a_problem(
        pokes in proptest::collection::vec((0usize..4096, any::<u8>()), 0..8),
        cut in prop_oneof![Just(None), (0u64..4096 + 4096 + 16).prop_map(Some)],
    ) {
        let (h, mut bytes) = valid_image();
        let original = bytes.clone();
        for (i, v) in pokes {
            bytes[i] = v;
        }
        let len = cut.unwrap_or(bytes.len() as u64);
        let head = &bytes[..len.min(IMAGE_HEADER_BYTES).min(bytes.len() as u64) as usize];
        let r = ImageHeader::decode(head, len);
        if bytes == original && len == original.len() as u64 {
            prop_assert_eq!(r, Ok(h));
        } else {
            let p = r.unwrap_err();
            prop_assert!(!p.to_string().is_empty());
        }
    }

    /// Arbitrary bytes as a header: a problem or (vanishingly rarely) a header that matches
    /// its file length; never a panic.
    #[test]
    fn any_bytes_decode_without_panic(
        b in proptest::collection::vec(any::<u8>(), 0..4200),
        len in any::<u64>(),
        magic in any::<bool>(),
    ) {
        let mut b = b;
        if magic && b.len() >= 8 {
            b[..8].copy_from_slice(b"BAMMODEL");
        }
        if let Ok(h) = ImageHeader::decode(&b, len) {
            prop_assert_eq!(h.file_bytes(), Some(len));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(128)))]

    /// The same through the file system and the whole model: a damaged image file is a
    /// typed error of the model's build, never a panic, and is left as it was.
    #[test]
    fn damaged_image_files_are_typed_errors(
        pokes in proptest::collection::vec((0usize..64, any::<u8>()), 1..4),
        cut in prop_oneof![Just(None), (0u64..8192 + 8).prop_map(Some)],
        read_only in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.img");
        let (_, mut bytes) = valid_image();
        let original = bytes.clone();
        for (i, v) in pokes {
            bytes[i] = v;
        }
        if let Some(n) = cut {
            bytes.truncate(n as usize);
        }
        let unchanged = bytes == original;
        std::fs::write(&p, &bytes).unwrap();
        let mut cfg = ModelConfig::open_file(&p);
        cfg.read_only = read_only;
        match cfg.build() {
            Ok(_) => prop_assert!(unchanged),
            Err(Error::ModelImage { problem, .. }) => {
                prop_assert!(!unchanged, "{}", problem);
            }
            Err(e) => prop_assert!(false, "untyped error: {}", e),
        }
        prop_assert!(std::fs::read(&p).unwrap() == bytes, "the file was changed");
    }
}

/// An image file buffers writes in the page cache until a Flush (`sync_data`): the model
/// says so (Identify Controller VWC bit 0), so hosts know to send Flush; RAM and a
/// read-only image have no volatile write cache to report.
#[test]
fn an_image_reports_its_volatile_write_cache() {
    let dir = tempfile::tempdir().unwrap();
    let vwc = |s: DeviceSpec, ro: bool| {
        let t = if ro {
            s.open_transport_read_only()
        } else {
            s.open_transport()
        };
        controller(t.unwrap()).identify().vwc & 1
    };
    assert_eq!(vwc(dev(dir.path(), "a.img", ",size=1M"), false), 1);
    assert_eq!(vwc(dev(dir.path(), "a.img", ""), true), 0);
    assert_eq!(vwc(spec("model:ram:1M"), false), 0);
}

/// The geometry the creation tests ask for: 256 blocks of 4 KiB.
const NEW: ImageHeader = ImageHeader {
    lba_size: 4096,
    blocks: 256,
};

fn create_new() -> ImageOptions {
    ImageOptions {
        create: Some(NEW),
        ..ImageOptions::default()
    }
}

/// What a crash during creation may leave at `p`: no image (nothing, or the empty file that
/// was there before) or a valid image of the geometry asked for; never a file that is
/// refused, as a half-written header once was ("truncated or extended").
fn assert_absent_or_valid(p: &Path, empty_before: bool, what: &str) {
    let checked = ImageOptions {
        lba_size: Some(NEW.lba_size),
        capacity_bytes: NEW.data_bytes(),
        ..ImageOptions::default()
    };
    match FileMedium::open(p, &checked) {
        Ok(m) => assert_eq!(m.header(), NEW, "{what}"),
        Err(e) => {
            let absent = if empty_before {
                ImageProblem::Empty
            } else {
                ImageProblem::Missing
            };
            assert_eq!(image_problem::<()>(Err(e)), absent, "{what}");
        }
    }
}

/// After a crash, creating the image again succeeds, and only the image is left in `dir`
/// (no temporary file of the crashed creation).
fn assert_creation_succeeds(dir: &Path, p: &Path, what: &str) {
    let m = FileMedium::open(p, &create_new()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(m.header(), NEW, "{what}");
    drop(m);
    let names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [p.file_name().unwrap()], "{what}: files left");
}

/// How many temporary files of a creation of `x.img` are in `dir`.
fn temps(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with(".x.img.bam-new-")
        })
        .count()
}

/// Whether a crash after step `k` leaves a temporary file (made at step 1, named or
/// removed at step 5; after a hard link at step 5, removed at step 6).
fn leaves_a_temp(k: usize, by_link: bool) -> bool {
    (1..=4).contains(&k) || (by_link && k == 5)
}

/// Creation stopped after each of its steps, as a process killed there would leave it
/// (files as they are, locks released, nothing cleaned up): the image is absent or valid,
/// and a later creation succeeds. Both ways of committing the new image (a no-replace
/// rename, and a hard link then unlink where the file system has no such rename), and
/// over an empty file (which creation turns into an image).
#[test]
fn creation_stopped_after_any_step_leaves_no_image_or_a_valid_one() {
    for by_link in [false, true] {
        for empty_before in [false, true] {
            for k in 0..=CREATION_STEPS {
                let what = format!(
                    "stopped after step {k} (by_link {by_link}, over an empty file {empty_before})"
                );
                let dir = tempfile::tempdir().unwrap();
                let p = dir.path().join("x.img");
                if empty_before {
                    std::fs::write(&p, b"").unwrap();
                }
                let hook = CreationHook {
                    after_step: &|s| s == k,
                    by_link,
                };
                let r = FileMedium::open_with_hook(&p, &create_new(), hook)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(r.is_none(), "{what}: creation was not stopped");
                let left = usize::from(leaves_a_temp(k, by_link && !empty_before));
                assert_eq!(temps(dir.path()), left, "{what}: temporary files");
                assert_absent_or_valid(&p, empty_before, &what);
                assert_creation_succeeds(dir.path(), &p, &what);
            }
        }
    }
}

/// A file that appears at the image's path while the new image is being written is not
/// replaced: the creation opens it instead (here a raw file, refused and left as it was).
#[test]
fn a_file_made_meanwhile_is_not_replaced_by_creation() {
    for by_link in [false, true] {
        for before in 1..CREATION_STEPS.min(5) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("x.img");
            let hook = CreationHook {
                after_step: &|s| {
                    if s == before {
                        std::fs::write(&p, [7u8; 1000]).unwrap();
                    }
                    false
                },
                by_link,
            };
            let e = FileMedium::open_with_hook(&p, &create_new(), hook);
            assert_eq!(
                image_problem(e),
                ImageProblem::NotAnImage { len: 1000 },
                "made after step {before}"
            );
            assert_eq!(std::fs::read(&p).unwrap(), [7u8; 1000], "untouched");
            let names = std::fs::read_dir(dir.path()).unwrap().count();
            assert_eq!(names, 1, "no temporary file is left");
        }
    }
}

/// The environment variable that makes [`creation_killed_at_any_step_leaves_no_image_or_a_valid_one`]
/// the child it spawns: `STEP BY_LINK PATH`.
const CRASH_CHILD: &str = "BAM_TEST_IMAGE_CREATION_CHILD";

/// What the child prints when it has done the steps it was given and waits to be killed.
const PAUSED: &str = "bam-test: creation paused after step ";

/// A real crash: a child process (this test binary, running this test with
/// [`CRASH_CHILD`] set) creates the image, stops after step k and waits; it is killed with
/// SIGKILL there. The image is absent or valid, and a later creation succeeds.
#[test]
fn creation_killed_at_any_step_leaves_no_image_or_a_valid_one() {
    const NAME: &str = "creation_killed_at_any_step_leaves_no_image_or_a_valid_one";
    if let Ok(args) = std::env::var(CRASH_CHILD) {
        return crash_child(&args);
    }
    use std::io::BufRead;
    for by_link in [false, true] {
        for k in 0..=CREATION_STEPS {
            let what = format!("killed after step {k} (by_link {by_link})");
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("x.img");
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(CRASH_CHILD, format!("{k} {by_link} {}", p.display()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // The marker shares its line with libtest's "test NAME ... ". Read on another
            // thread, so that a child that never pauses fails the test instead of hanging it.
            let out = std::io::BufReader::new(child.stdout.take().unwrap());
            let (tx, rx) = std::sync::mpsc::channel();
            let marker = format!("{PAUSED}{k}");
            std::thread::spawn(move || {
                let paused = out
                    .lines()
                    .map_while(Result::ok)
                    .any(|l| l.ends_with(&marker));
                let _ = tx.send(paused);
            });
            let paused = rx.recv_timeout(std::time::Duration::from_secs(60)) == Ok(true);
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            assert!(paused, "{what}: the child did not reach the step");
            let left = usize::from(leaves_a_temp(k, by_link));
            assert_eq!(temps(dir.path()), left, "{what}: temporary files");
            assert_absent_or_valid(&p, false, &what);
            assert_creation_succeeds(dir.path(), &p, &what);
        }
    }
}

/// The child of [`creation_killed_at_any_step_leaves_no_image_or_a_valid_one`]: creates the
/// image, and after the step it was given says so and sleeps until it is killed.
fn crash_child(args: &str) {
    use std::io::Write;
    let mut it = args.splitn(3, ' ');
    let k: usize = it.next().unwrap().parse().unwrap();
    let by_link: bool = it.next().unwrap().parse().unwrap();
    let p = Path::new(it.next().unwrap());
    let hook = CreationHook {
        after_step: &|s| {
            if s == k {
                println!("{PAUSED}{s}");
                std::io::stdout().flush().unwrap();
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(60));
                }
            }
            false
        },
        by_link,
    };
    let r = FileMedium::open_with_hook(p, &create_new(), hook);
    panic!("creation ended without pausing after step {k}: {r:?}");
}

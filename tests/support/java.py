"""Compile and run the Java programs in ``tests/java`` against the kafka-clients jars.

Two client versions: ``"3.9"`` (``.reference/jars``, from ``scripts/reference.sh``) and ``"4"`` (the
newest kafka-clients 4.x in ``.reference/jars-4``, from ``scripts/clients.sh``). The sources are
compiled once per version into ``.reference/java-build/<hash>``, where the hash covers the sources,
the jars and the javac binary, so a re-run with nothing changed skips javac entirely. Probes that use
the client's internal classes (``INTERNAL_PROBES``) are compiled against 3.9 only::

    java = require_java()                      # pytest.fail (never skip) if it cannot be had
    java = require_java("4")                   # the 4.x client; the ``java_clients`` fixture
                                               # (tests/conftest.py) sets the default per test
    rc, out, err = java.run("AdminProbe", [bootstrap, "cluster"])
    with java.session("AdminProbe", [bootstrap]) as s:   # one JVM, commands over stdin
        line = s.request("topics")

The programs print one JSON object per result line; :func:`json_lines` parses stdout.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from tests.support.reference import REFERENCE_DIR, REPO_ROOT, ReferenceUnavailable, ensure_reference

JAVA_SRC = REPO_ROOT / "tests" / "java"
JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")
#: Client versions the Java suites run against, oldest first.
VERSIONS = ("3.9", "4")
#: Jar sets fetched by scripts/clients.sh: version -> (directory under .reference, a jar it must hold).
#: ``"streams"`` is Kafka Streams with its own kafka-clients, for tests/java-streams.
FETCHED = {"4": ("jars-4", "kafka-clients-4."), "streams": ("streams-4", "kafka-streams-4.")}
STREAMS_SRC = REPO_ROOT / "tests" / "java-streams"
#: ``"broker"``: probes of the Kafka broker's own classes (tests/java-broker), compiled against the
#: real broker's jars that scripts/kafka.sh caches in .reference/kafka-broker
BROKER_SRC = REPO_ROOT / "tests" / "java-broker"
BROKER_JARS = ("kafka-broker", "kafka-group-coordinator-4.")
#: Probes built on classes that are not public API (moved in 4.x): compiled for 3.9 only.
INTERNAL_PROBES = ("RecordsProbe.java",)
#: Short-lived JVMs: skip the C2 compiler and the parallel GC, both only cost start-up time here.
JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")


class JavaUnavailable(RuntimeError):
    """java/javac or the client jars are missing, or the sources do not compile."""


class JavaResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def json_lines(text: str) -> list[dict]:
    """Every line of ``text`` that is a JSON object, parsed."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


class Java:
    def __init__(self, java: str, classpath: list[Path], version: str = "3.9"):
        self.java = java
        self.version = version
        self.classpath = os.pathsep.join(str(p) for p in classpath)

    def command(self, main: str, args: list[str] | tuple[str, ...] = ()) -> list[str]:
        return [self.java, *JVM_OPTS, "-cp", self.classpath, main, *args]

    def run(self, main: str, args: list[str] | tuple[str, ...] = (), timeout: float = 60.0) -> JavaResult:
        """Run ``main`` to completion; a timeout kills the JVM and raises ``TimeoutError``."""
        try:
            proc = subprocess.run(
                self.command(main, args),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise TimeoutError(
                f"{main} {' '.join(args)} did not finish in {timeout}s\n"
                f"stdout:\n{_text(e.stdout)}\nstderr:\n{_text(e.stderr)}"
            ) from None
        return JavaResult(proc.returncode, proc.stdout, proc.stderr)

    def session(
        self, main: str, args: list[str] | tuple[str, ...] = (), timeout: float = 60.0
    ) -> JavaSession:
        """Start ``main`` reading commands from stdin (one result line per command)."""
        return JavaSession(self.command(main, args), timeout)


class JavaSession:
    """A JVM fed one command per stdin line, answering each with exactly one stdout line."""

    def __init__(self, cmd: list[str], timeout: float):
        self.timeout = timeout
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self._out = threading.Thread(target=self._pump_stdout, daemon=True)
        self._err = threading.Thread(target=self._pump_stderr, daemon=True)
        self._out.start()
        self._err.start()
        self.result: JavaResult | None = None

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def next_line(self, timeout: float | None = None) -> str | None:
        """The next stdout line (``None`` once the process has exited); ``TimeoutError`` if none comes."""
        try:
            return self._lines.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise TimeoutError(f"no output line; stderr so far:\n{self.stderr[-4000:]}") from None

    def request(self, command: str, timeout: float | None = None) -> dict:
        """Send one command and return its parsed result line."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"JVM exited before {command!r}; stderr:\n{self.stderr}") from None
        try:
            line = self._lines.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise TimeoutError(f"no answer to {command!r}; stderr so far:\n{self.stderr}") from None
        if line is None:
            raise RuntimeError(f"JVM exited during {command!r}; stderr:\n{self.stderr}")
        return json.loads(line)

    def close(self) -> JavaResult:
        """Close stdin, wait for the JVM to exit (killing it after the timeout)."""
        if self.result is None:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                rc = self.proc.wait(self.timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
            self._out.join(5)
            self._err.join(5)
            rest = []
            while not self._lines.empty():
                line = self._lines.get_nowait()
                if line is not None:
                    rest.append(line + "\n")
            self.result = JavaResult(rc, "".join(rest), self.stderr)
        return self.result

    def __enter__(self) -> JavaSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode(errors="replace")


def jar_paths(reference_dir: Path = REFERENCE_DIR, version: str = "3.9") -> list[Path]:
    """The client jars of ``version``, fetching them first if needed."""
    if version in FETCHED:
        return _fetched_jars(reference_dir, version)
    if version == "broker":
        return _broker_jars(reference_dir)
    try:
        ref = ensure_reference(reference_dir)
    except ReferenceUnavailable as e:
        raise JavaUnavailable(f"the Java client jars could not be fetched: {e}") from e
    jars = [ref / "jars" / name for name in JARS]
    missing = [p.name for p in jars if not p.is_file() or p.stat().st_size == 0]
    if missing:
        raise JavaUnavailable(
            f"missing jars in {ref / 'jars'}: {missing}; remove {ref / 'kafka-3.9' / '.done'} "
            "and run scripts/reference.sh to fetch them again"
        )
    return jars


def _fetched_jars(reference_dir: Path, version: str) -> list[Path]:
    out = reference_dir / FETCHED[version][0]
    if not any(out.glob(".done-*")):
        try:
            proc = subprocess.run(
                [str(REPO_ROOT / "scripts" / "clients.sh"), str(reference_dir)],
                capture_output=True,
                text=True,
                timeout=900,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JavaUnavailable(f"scripts/clients.sh could not run: {e}") from e
        if proc.returncode != 0:
            raise JavaUnavailable(f"scripts/clients.sh failed:\n{proc.stdout}{proc.stderr}")
    jars = sorted(out.glob("*.jar"))
    if not any(p.name.startswith(FETCHED[version][1]) for p in jars):
        raise JavaUnavailable(f"no {FETCHED[version][1]}* jar in {out}; run scripts/clients.sh")
    return jars


def _broker_jars(reference_dir: Path) -> list[Path]:
    out = reference_dir / BROKER_JARS[0]
    if not any(out.glob(BROKER_JARS[1] + "*.jar")):
        try:
            proc = subprocess.run(
                [str(REPO_ROOT / "scripts" / "kafka.sh"), str(out)],
                capture_output=True,
                text=True,
                timeout=900,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JavaUnavailable(f"scripts/kafka.sh could not run: {e}") from e
        if proc.returncode != 0:
            raise JavaUnavailable(f"scripts/kafka.sh failed:\n{proc.stdout}{proc.stderr}")
    jars = sorted(out.glob("*.jar"))
    if not any(p.name.startswith(BROKER_JARS[1]) for p in jars):
        raise JavaUnavailable(f"no {BROKER_JARS[1]}* jar in {out}; run scripts/kafka.sh")
    return jars


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise JavaUnavailable(f"{name} is not on PATH (a JDK 17+ is required for the Java client tests)")
    return os.path.realpath(path)


def compile_sources(src: Path = JAVA_SRC, reference_dir: Path = REFERENCE_DIR, version: str = "3.9") -> Java:
    """Compile every ``*.java`` under ``src`` (cached by content hash) and return a runner."""
    java, javac = _tool("java"), _tool("javac")
    jars = jar_paths(reference_dir, version)
    sources = sorted(src.rglob("*.java"))
    if version != "3.9":
        sources = [p for p in sources if p.name not in INTERNAL_PROBES]
    if not sources:
        raise JavaUnavailable(f"no Java sources under {src}")
    h = hashlib.sha256()
    h.update(javac.encode())
    for jar in jars:
        st = jar.stat()
        h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    for p in sources:
        h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes() + b"\0")
    out = reference_dir / "java-build" / (h.hexdigest()[:16] + ("" if version == "3.9" else f"-{version}"))
    if not (out / ".done").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
        try:
            cmd = [javac, "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(map(str, jars))]
            cmd += ["-d", str(tmp), *map(str, sources)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise JavaUnavailable(f"javac could not run: {e}") from e
            if proc.returncode != 0:
                raise JavaUnavailable(f"javac failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
            (tmp / ".done").touch()
            try:
                tmp.rename(out)
            except OSError:  # another process finished the same build first
                if not (out / ".done").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Java(java, [out, *jars], version)


@functools.cache
def _cached(version: str) -> Java | JavaUnavailable:
    try:
        src = {"streams": STREAMS_SRC, "broker": BROKER_SRC}.get(version, JAVA_SRC)
        return compile_sources(src, version=version)
    except JavaUnavailable as e:
        return e


#: The version ``require_java()`` gives by default; the ``java_clients`` fixture sets it per test.
_default_version = ["3.9"]


def use_version(version: str) -> str:
    """Make ``version`` the default of :func:`require_java`; returns the previous default."""
    if version not in VERSIONS:
        raise ValueError(f"unknown Java client version {version!r}; known: {VERSIONS}")
    previous, _default_version[0] = _default_version[0], version
    return previous


def require_java(version: str | None = None) -> Java:
    """The compiled runner for this session and client version (default: the ``java_clients``
    fixture's, else 3.9; ``"streams"``: tests/java-streams with Kafka Streams; ``"broker"``:
    tests/java-broker with the Kafka broker's jars); fails the calling test (never skips) if unavailable."""
    import pytest

    got = _cached(version or _default_version[0])
    if isinstance(got, JavaUnavailable):
        pytest.fail(f"the Java client tests need java, javac and the client jars: {got}", pytrace=False)
    return got

"""Node lists for ``--fleet``: the fleet CSV and openb node lists under any file name."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.traces import load_trace
from scheduling.traces.errors import TraceFormatError
from scheduling.traces.nodes import read_node_list

FLEET = """name,gpus,gpu_model,cpu_milli,memory_mib,leaf_switch,nvlink_domain
dgx01,8,H100,96000,1024000,leafA,
dgx02,8,H100,96000,1024000,leafA,nv2
l4-01,4,L4,,,,
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_fleet_csv_gives_named_nodes_with_their_topology(tmp_path: Path) -> None:
    nodes, report = read_node_list(write(tmp_path, "my-cluster.csv", FLEET))

    assert [(n.name, n.gpu_total, n.gpu_model) for n in nodes] == [
        ("dgx01", 8, "H100"),
        ("dgx02", 8, "H100"),
        ("l4-01", 4, "L4"),
    ]
    assert (nodes[0].cpu_milli_total, nodes[0].memory_mib_free) == (96000, 1024000)
    assert [n.nvlink_domain for n in nodes] == ["dgx01", "nv2", "l4-01"]  # empty: its own domain
    assert [n.leaf_switch for n in nodes] == ["leafA", "leafA", ""]  # empty: its own leaf
    assert (report.rows_read, report.rows_kept) == (3, 3)


def test_without_a_leaf_switch_column_hosts_share_switches_32_at_a_time(tmp_path: Path) -> None:
    rows = "".join(f"n{i},8,A100\n" for i in range(40))
    nodes, _ = read_node_list(write(tmp_path, "f.csv", "name,gpus,gpu_model\n" + rows))

    assert {n.leaf_switch for n in nodes[:32]} == {"leaf000"}
    assert {n.leaf_switch for n in nodes[32:]} == {"leaf001"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("name,gpus,gpu_model\na,8,H100\nb,eight,H100\n", ":3:2: column 'gpus'"),
        ("name,gpus,gpu_model\na,8,H100\na,8,H100\n", ":3:1: column 'name'"),
        ("name,gpus,gpu_model\n,8,H100\n", ":2:1: column 'name'"),
        ("name,gpus,gpu_model\na,-1,H100\n", ":2:2: column 'gpus'"),
        ("name,gpus,gpu_model,cpu_milli\na,8,H100,lots\n", ":2:4: column 'cpu_milli'"),
        ("name,gpus,gpu_model\na,8\n", ":2:3: column 'gpu_model'"),
        ("host,gpu\na,8\n", ":1: column 'name'"),
    ],
)
def test_every_bad_row_names_file_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, "bad.csv", text)

    with pytest.raises(TraceFormatError) as caught:
        read_node_list(path)

    assert str(caught.value).startswith(f"{path}{where}")


def test_skip_mode_counts_bad_node_rows(tmp_path: Path) -> None:
    path = write(tmp_path, "f.csv", "name,gpus,gpu_model\na,8,H100\nb,x,H100\na,8,H100\n")

    nodes, report = read_node_list(path, on_error="skip")

    assert [n.name for n in nodes] == ["a"]
    assert report.skipped == {"malformed": 2}


def test_an_openb_node_list_is_read_under_any_name(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes-2023.csv", "sn,cpu_milli,memory_mib,gpu,model\nh1,64000,262144,2,V100M32\n")

    nodes, _ = read_node_list(path)

    assert [(n.name, n.gpu_total, n.gpu_model) for n in nodes] == [("h1", 2, "V100M32")]


def test_a_fleet_replaces_an_openb_pod_lists_sibling_node_list(tmp_path: Path) -> None:
    pods = write(
        tmp_path,
        "openb_pod_list_tiny.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\np2,1000,1024,2,1000\n",
    )  # no openb_node_list_gpu_node.csv beside it
    fleet = write(tmp_path, "elsewhere.csv", "name,gpus,gpu_model\nx,4,T4\n")

    trace = load_trace(str(pods), fleet=fleet)

    assert [n.name for n in trace.nodes] == ["x"]
    assert len(trace.jobs) == 2
    assert trace.reports[0].path == str(fleet)


def test_a_fleet_gives_a_generic_csv_its_nodes(fixtures: Path, tmp_path: Path) -> None:
    fleet = write(tmp_path, "f.csv", FLEET)

    trace = load_trace(str(fixtures / "generic_jobs.csv"), fleet=fleet)

    assert trace.gpu_capacity == 20


def test_an_empty_fleet_is_an_error(fixtures: Path, tmp_path: Path) -> None:
    fleet = write(tmp_path, "f.csv", "name,gpus,gpu_model\n")

    with pytest.raises(TraceFormatError, match="no nodes"):
        load_trace(str(fixtures / "generic_jobs.csv"), fleet=fleet)


# Alibaba 2026 spot-GPU layout (cluster-trace-v2026-spot-gpu/node_info_df.csv): column order as published,
# rows made up here (the trace itself is research-or-study only and is read from ../shared/traces).
SPOT = """gpu_model,gpu_capacity_num,cpu_num,node_name
GPU-series-1,4,192,0
A10,1,128,1
A100-SXM4-80GB,8,128,2
"""


def test_an_alibaba_spot_gpu_node_list_keeps_names_models_and_sizes(tmp_path: Path) -> None:
    nodes, report = read_node_list(write(tmp_path, "node_info_df.csv", SPOT))

    assert [(n.name, n.gpu_total, n.gpu_model) for n in nodes] == [
        ("0", 4, "GPU-series-1"),
        ("1", 1, "A10"),
        ("2", 8, "A100-SXM4-80GB"),
    ]
    assert [n.cpu_milli_total for n in nodes] == [192_000, 128_000, 128_000]  # vCPUs -> milli-cores
    assert [n.memory_mib_total for n in nodes] == [0, 0, 0]  # not in the file: not tracked
    assert {n.leaf_switch for n in nodes} == {"leaf000"}  # 32 hosts to a leaf in file order
    assert [n.nvlink_domain for n in nodes] == ["0", "1", "2"]
    assert (report.rows_read, report.rows_kept) == (3, 3)


def test_a_bad_spot_gpu_row_names_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "node_info_df.csv", SPOT + "A10,one,128,3\n")

    with pytest.raises(TraceFormatError, match=r"node_info_df.csv:5:2: column 'gpu_capacity_num'"):
        read_node_list(path)


def test_a_duplicate_spot_gpu_node_name_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "node_info_df.csv", SPOT + "A10,1,128,1\n")

    with pytest.raises(TraceFormatError, match="node_name"):
        read_node_list(path)

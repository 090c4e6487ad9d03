-- Unit test of etc/job_submit.lua under a stand-in of Slurm's `slurm` table (Slurm's
-- own job_submit/lua calls these functions with job_desc tables of the same fields).
-- Run: lua5.3 tests/lua/job_submit_test.lua etc/job_submit.lua TABLE TIGHT HRES
-- where TABLE is what `greenup site licenses SITE --lua TABLE` wrote for a site whose
-- node types give min_node_w = 45 and max_node_w = 160 on 4 nodes (tests/cluster/greenup.yaml
-- with power.enforce: queue: caps 2 kW and 1 kW), and TIGHT the same site with a 150 W
-- site cap and a 237 W partition cap, and HRES the same site under power.enforce: hres
-- (site and debug caps 400 W, racks r1 = n[1-2] at 200 W and r2 = n[3-4] at 120 W, reserve
-- 0.3: the resource's layers count 280, 140 and 84 W, debug's flat license 280 W).
-- Expected numbers are written out by hand below.
local script, table_path, tight_path, hres_path = arg[1], arg[2], arg[3], arg[4]
local said = {}
slurm = {
  SUCCESS = 0, ERROR = -1, NO_VAL = 0xfffffffe,
  log_info = function(...) end,
  log_error = function(fmt, ...) table.insert(said, "error: " .. string.format(fmt, ...)) end,
  log_user = function(fmt, ...) table.insert(said, string.format(fmt, ...)) end,
}
local src = assert(io.open(script)):read("a")
local function load_script(path)
  local s = string.gsub(src, 'local TABLE = "[^"]*"', 'local TABLE = "' .. path .. '"')
  assert(load(s, "job_submit.lua"))()
end
load_script(table_path)

local failed = 0
local function check(what, got, want)
  if got ~= want then
    failed = failed + 1
    print(string.format("FAIL %s: got %s, want %s", what, tostring(got), tostring(want)))
  else
    print("ok   " .. what)
  end
end
local parts = { debug = { flag_default = 1 } }
local function submit(job)
  said = {}
  local rc = slurm_job_submit(job, parts, 1000)
  return rc, job.licenses
end

-- No request: the nodes' full power (2 x 160 W), on the site's and the partition's license.
check("two nodes, nothing asked", select(2, submit({ min_nodes = 2, partition = "debug" })),
  "greenup_w:320,greenup_w_debug:320")
-- The default partition when none is named.
check("default partition", select(2, submit({ min_nodes = 1 })), "greenup_w:160,greenup_w_debug:160")
-- A quote within the bounds is kept; other licenses are kept as written.
check("quote kept", select(2, submit({ min_nodes = 2, licenses = "matlab:1,greenup_w:200" })),
  "matlab:1,greenup_w:200,greenup_w_debug:200")
-- Asking too little is raised to the lowest clock's power (2 x 45 W), too much lowered.
check("too little raised", select(2, submit({ min_nodes = 2, licenses = "greenup_w:1" })),
  "greenup_w:90,greenup_w_debug:90")
check("raised and said so", said[1] ~= nil and string.find(said[1], "held 90 W", 1, true) ~= nil, true)
check("too much lowered", select(2, submit({ min_nodes = 1, licenses = "greenup_w_debug*9999" })),
  "greenup_w:160,greenup_w_debug:160")
-- Unset node counts are NO_VAL: then the maximum, else one node.
check("max nodes when no min", select(2, submit({ min_nodes = slurm.NO_VAL, max_nodes = 3 })),
  "greenup_w:480,greenup_w_debug:480")
check("one node when none", select(2, submit({ min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL })),
  "greenup_w:160,greenup_w_debug:160")
-- Slurm picks the count within -N's range, or spreads -n's tasks, when it starts the
-- job: the job holds watts for the most nodes it can get, at most the partition's 4.
check("-N 1-3 holds for three", select(2, submit({ min_nodes = 1, max_nodes = 3 })),
  "greenup_w:480,greenup_w_debug:480")
check("-N 1-3 may ask for one node's lowest", select(2, submit({ min_nodes = 1, max_nodes = 3, licenses = "greenup_w:45" })),
  "greenup_w:45,greenup_w_debug:45")
check("-n 8 spreads over the partition's 4", select(2, submit({ num_tasks = 8, min_nodes = slurm.NO_VAL, max_nodes = slurm.NO_VAL })),
  "greenup_w:640,greenup_w_debug:640")
check("-n 8 --ntasks-per-node=4 is two nodes", select(2, submit({ num_tasks = 8, ntasks_per_node = 4 })),
  "greenup_w:320,greenup_w_debug:320")
check("unset ntasks_per_node (NO_VAL16)", select(2, submit({ num_tasks = 3, ntasks_per_node = 0xfffe })),
  "greenup_w:480,greenup_w_debug:480")
-- A partition greenup does not know holds the site's license only.
check("unknown partition", select(2, submit({ min_nodes = 1, partition = "other" })), "greenup_w:160")
-- OR-ed licenses cannot be combined: refused with a message.
check("'|' refused", (submit({ min_nodes = 1, licenses = "a:1|b:1" })), slurm.ERROR)

-- Changes after submission: only an operator may change greenup's licenses.
local rec = { licenses = "greenup_w:160,greenup_w_debug:160" }
check("owner drops them", slurm_job_modify({ licenses = "" }, rec, parts, 1000), slurm.ERROR)
check("owner changes them", slurm_job_modify({ licenses = "greenup_w:1,greenup_w_debug:1" }, rec, parts, 1000), slurm.ERROR)
check("owner changes other licenses", slurm_job_modify({ licenses = "matlab:2,greenup_w:160,greenup_w_debug:160" }, rec, parts, 1000), slurm.SUCCESS)
check("root changes them", slurm_job_modify({ licenses = "greenup_w:100,greenup_w_debug:100" }, rec, parts, 0), slurm.SUCCESS)
check("other changes pass", slurm_job_modify({ name = "x" }, rec, parts, 1000), slurm.SUCCESS)

-- Under a tight cap (site 150 W, debug 237 W): the smaller total binds. A job that fits
-- at its nodes' lowest clock is held to the cap rather than refused by Slurm; one that
-- can never fit is refused with how many nodes would.
load_script(tight_path)
check("two nodes clamped to the cap", select(2, submit({ min_nodes = 2 })), "greenup_w:150,greenup_w_debug:150")
check("nothing asked, nothing said", #said, 0)
check("asked too much, clamped", select(2, submit({ min_nodes = 1, licenses = "greenup_w:317" })),
  "greenup_w:150,greenup_w_debug:150")
check("said so", said[1] ~= nil and string.find(said[1], "asked 317 W, held 150 W", 1, true) ~= nil, true)
check("three nodes fit at their lowest (135 W)", select(2, submit({ min_nodes = 3 })), "greenup_w:150,greenup_w_debug:150")
check("four never fit (180 W)", (submit({ min_nodes = 4 })), slurm.ERROR)
check("refusal says how many fit", said[1],
  "greenup: a job on 4 node(s) draws at least 180 W at their lowest clock; the power cap grants at most 150 W: ask for at most 3 node(s)")

-- Under hres a job holds a count a node of greenup_w (Slurm counts it on each node, in
-- the site's layer and its rack's) and the partition's total. The ceiling a node for n
-- nodes is the largest count the racks can place n nodes under: one node fits r1 at
-- 140 W; two fit only one in each rack, so r2's 84 W binds; four would need 42 W each
-- (r2 holds two at 42, and 4 x 70 W would fit the site's 280 W but r2 holds only one at
-- 70), below a fast node's 45 W at its lowest clock.
load_script(hres_path)
check("hres: one node, nothing asked", select(2, submit({ min_nodes = 1 })), "greenup_w:140,greenup_w_debug:140")
check("hres: two nodes, nothing asked", select(2, submit({ min_nodes = 2 })), "greenup_w:84,greenup_w_debug:168")
check("hres: a 120 W quote over two nodes", select(2, submit({ min_nodes = 2, licenses = "greenup_w:120" })),
  "greenup_w:60,greenup_w_debug:120")
check("hres: other licenses kept", select(2, submit({ min_nodes = 1, licenses = "matlab:1,greenup_w:60" })),
  "matlab:1,greenup_w:60,greenup_w_debug:60")
check("hres: too little raised", select(2, submit({ min_nodes = 1, licenses = "greenup_w:10" })),
  "greenup_w:45,greenup_w_debug:45")
check("hres: and said so", said[1], "greenup: power asked 10 W, held 45 W a node: a job on 1 node(s) holds 45-140 W a node")
check("hres: -N 1-3 sized for one node, its total for three", select(2, submit({ min_nodes = 1, max_nodes = 3 })),
  "greenup_w:140,greenup_w_debug:280")
check("hres: four nodes never fit", (submit({ min_nodes = 4 })), slurm.ERROR)
check("hres: the refusal says why", said[1],
  "greenup: a job on 4 node(s) draws at least 45 W a node at their lowest clock; the racks and power caps grant at most 42 W a node to 4 node(s): ask for fewer nodes")
local hrec = { licenses = "greenup_w:84,greenup_w_debug:168" }
check("hres: owner changes the count a node", slurm_job_modify({ licenses = "greenup_w:1,greenup_w_debug:168" }, hrec, parts, 1000), slurm.ERROR)

if failed > 0 then print(failed .. " failed"); os.exit(1) end
print("all passed")

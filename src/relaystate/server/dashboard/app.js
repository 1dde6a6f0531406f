// relaystate dashboard: plain JS, no build step. It talks to the /v1 API with the user's key
// (Authorization: Bearer), keeps the key in sessionStorage (this tab only, forgotten when
// it closes, not left for every later page of this origin to read), the chat's Session id
// and the language in localStorage, and follows the open Task through server-sent events.
// It runs under a strict Content-Security-Policy (server/headers.py): no inline script or
// style, no eval, no style attribute (classes, or element.style from script).
"use strict";

const KEY_STORE = "relaystate.key";
localStorage.removeItem(KEY_STORE); // where an older dashboard kept it
const SESSION_STORE = "relaystate.session";
const LANG_STORE = "relaystate.lang";

// The dashboard's own words, in both languages (Tasks, slots and statuses are named by the
// server: GET /v1/agents).
const WORDS = {
  en: {
    memorySearch: "Memory search", operators: "Operators", signedInAs: "Signed in as",
    signOut: "Sign out", chat: "Chat", newSession: "New Session", send: "Send",
    chatPlaceholder: "e.g. book a flight from Beijing to Shanghai", tasks: "Tasks",
    refresh: "Refresh", noTasks: "No tasks yet: ask for something in the chat.", back: "← Back",
    slots: "Slots", slot: "Slot", value: "Value", slotHistory: "History (journal version: value)",
    context: "Context", actions: "Actions", noActions: "No Actions yet: they start once the Task is confirmed.",
    journal: "Journal", memory: "Memory", you: "You", agent: "Agent", error: "Error",
    openTask: "open Task", missing: "missing", stage: "stage", updated: "updated", user: "user",
    greeting: "Hello! I can help with: {agents}. What would you like to do?",
    bookkeeping: "bookkeeping and every field ({n})", showAll: "show all", showLess: "show less",
    noSlots: "no slots filled", confirm: "Confirm", decline: "Decline", resume: "Resume",
    cancel: "Cancel", progress: "progress", version: "version", goal: "goal",
    createdUpdated: "created / updated", status: "status", id: "id",
    atVersion: "At version {v}: ", actionCount: "{n} Action(s)", action: "Action",
    attempts: "Attempts", idempotencyKey: "Idempotency key", output: "Output",
    live: "live", offline: "offline", retrying: "offline, retrying…", connecting: "connecting…",
    reconnecting: "reconnecting…", replayAt: "Replay at journal version", of: "{a} of {b}",
    contextHint: "the prompt the next turn gets from memory, and why",
    history: "History", language: "Language", session: "Session", conversation: "Conversation", message: "Message",
    signIn: "Sign in", apiKey: "API key",
    checks: "(+{n} checks)", programmingError: "An error in the Action's own code (not retried): ",
  },
  zh: {
    memorySearch: "记忆搜索", operators: "运维", signedInAs: "当前用户", signOut: "退出",
    chat: "对话", newSession: "新会话", send: "发送", chatPlaceholder: "例如：订一张从北京到上海的机票",
    tasks: "任务", refresh: "刷新", noTasks: "还没有任务：在对话里说说您想办的事。", back: "← 返回",
    slots: "信息", slot: "项目", value: "值", slotHistory: "历史（日志版本：值）", context: "上下文",
    actions: "操作", noActions: "还没有操作：任务确认后开始。", journal: "日志", memory: "记忆",
    you: "您", agent: "助手", error: "错误", openTask: "打开任务", missing: "待填", stage: "阶段",
    updated: "更新于", user: "用户", greeting: "您好！我可以帮您：{agents}。想办什么？",
    bookkeeping: "内部字段与全部改动（{n}）", showAll: "展开全部", showLess: "收起",
    noSlots: "还没有填写信息", confirm: "确认", decline: "不对", resume: "继续", cancel: "取消",
    progress: "进度", version: "版本", goal: "目标", createdUpdated: "创建 / 更新", status: "状态",
    id: "编号", atVersion: "版本 {v}：", actionCount: "{n} 个操作", action: "操作",
    live: "实时", offline: "离线", retrying: "离线，正在重试…", connecting: "连接中…",
    reconnecting: "重新连接中…", replayAt: "回放日志版本", of: "{a} / {b}",
    contextHint: "下一轮对话从记忆中取得的提示，以及取舍原因",
    history: "历史", language: "语言", session: "会话", conversation: "对话记录", message: "消息", signIn: "登录",
    apiKey: "API 密钥",
    keyHint: "用 relaystate users create NAME 创建密钥；relaystate serve 会为用户 demo 打印一个。密钥只保存在当前标签页（sessionStorage），关闭标签页即被清除。",
    attempts: "尝试次数", idempotencyKey: "幂等键", output: "输出", checks: "（另核对 {n} 次）",
    programmingError: "操作自身代码出错（不会重试）：",
  },
};

function initialLanguage() {
  const stored = localStorage.getItem(LANG_STORE);
  if (stored === "en" || stored === "zh") return stored;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

function t(key, values = {}) {
  const text = (WORDS[state.lang] || WORDS.en)[key] || WORDS.en[key] || key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(values[name] ?? ""));
}

const state = {
  key: sessionStorage.getItem(KEY_STORE),
  me: null,
  sessionId: localStorage.getItem(SESSION_STORE),
  tasks: [],
  taskId: null, // the Task whose page is open
  task: null,
  history: null, // {baseline, entries} of the open Task
  events: null, // its EventSource
  reopenTimer: null,
  replaySeq: 0, // answers to older slider positions are dropped
  replayed: null, // "taskId@version" shown in #replayed-state (a past version never changes)
  followLatest: true, // the slider stays on the newest entry until the user moves it
  contextSeq: 0, // answers to older context requests are dropped
  contextFor: null, // "taskId@version budget query" the Context section shows
  contextTimer: null,
  contextData: null, // the last context answer, for the layer filter
  memorySeq: 0, // answers to older memory searches are dropped
  opsSeq: 0, // answers to older Operators refreshes are dropped
  opsTimer: null, // the next Operators refresh
  opsLoadedAt: 0, // when the Operators panel last asked the server (ms)
  opsOnScreen: false, // whether any of the Operators panel is in the viewport
  lang: initialLanguage(), // the dashboard's language: en or zh
  agents: null, // GET /v1/agents: what to call task types, slots and statuses
};

const $ = (sel) => document.querySelector(sel);

// Build DOM nodes; text always goes through textContent, so nothing from the API is HTML.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// ---- the API -------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body, key = state.key, extra = {}) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${key}`, ...extra };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, "network", `The server cannot be reached (${err.message}).`);
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null; // e.g. a proxy's HTML error page: reported below by status
  }
  if (!response.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(
      response.status,
      e.code || `http_${response.status}`,
      e.message || `${method} ${path} answered ${response.status}.`,
    );
  }
  return data;
}

// A turn goes with its own Idempotency-Key and is sent again, with the same key, when its
// answer is lost on the way (no answer, or 503 while the server restarts): the server answers
// the retry from the turn it committed, so a turn is never done twice.
function requestKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16)); // also on plain http (no randomUUID)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sendTurn(text) {
  const path = `/v1/sessions/${encodeURIComponent(state.sessionId)}/messages`;
  const headers = { "Idempotency-Key": requestKey() };
  for (let attempt = 1; ; attempt++) {
    try {
      return await api("POST", path, { text }, state.key, headers);
    } catch (err) {
      const lost = err instanceof ApiError && (err.status === 0 || err.status === 503);
      if (!lost || attempt >= 4) throw err;
      await new Promise((resolve) => setTimeout(resolve, 400 * attempt));
    }
  }
}

function errorText(err) {
  return err instanceof ApiError ? `${err.code}: ${err.message}` : String(err.message || err);
}

function showError(err) {
  $("#error-text").textContent = errorText(err);
  $("#error-banner").hidden = false;
  // A key that stopped working (revoked) sends the user back to the sign-in form.
  if (err instanceof ApiError && err.status === 401 && state.me) signOut(err.message);
}

function clearError() {
  $("#error-banner").hidden = true;
  $("#error-text").textContent = "";
}

// ---- formatting ----------------------------------------------------------------------

function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

function fmtDuration(fromIso, toIso) {
  const ms = new Date(toIso) - new Date(fromIso);
  if (!Number.isFinite(ms) || ms < 0) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function fmtOutput(output) {
  return output === null || output === undefined ? "—" : JSON.stringify(output, null, 1);
}

// An Action's output: a few lines, and all of it on demand.
function outputOf(output) {
  const text = fmtOutput(output);
  const pre = h("pre", { class: "output" }, text);
  if (text.split("\n").length <= 8 && text.length <= 400) return pre;
  const more = h("button", { type: "button", class: "link small", dataset: { testid: "output-more" } }, t("showAll"));
  more.addEventListener("click", () => {
    const open = pre.classList.toggle("full");
    more.textContent = t(open ? "showLess" : "showAll");
  });
  return h("div", { class: "output-wrap" }, pre, more);
}

function fmtValue(value) {
  if (value === undefined) return "(absent)";
  if (value === null) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// What people call things, from GET /v1/agents, in the dashboard's language.
function agentOf(type) {
  return ((state.agents && state.agents.agents) || []).find((a) => a.type === type);
}

function title(type) {
  const agent = agentOf(type);
  return (agent && agent.titles[state.lang]) || String(type).replaceAll("_", " ");
}

function slotLabel(type, name) {
  const agent = agentOf(type);
  const labels = agent && agent.slots[name];
  return (labels && labels[state.lang]) || String(name).replaceAll("_", " ");
}

function stageLabel(type, name) {
  const agent = agentOf(type);
  const labels = agent && agent.stages && agent.stages[name];
  return (labels && labels[state.lang]) || String(name).replaceAll("_", " ");
}

function statusLabel(status) {
  const words = state.agents && state.agents.statuses && state.agents.statuses[state.lang];
  return (words && words[status]) || String(status).replaceAll("_", " ");
}

function actionBadge(status) {
  const words = state.agents && state.agents.action_statuses && state.agents.action_statuses[state.lang];
  const label = (words && words[status]) || String(status).replaceAll("_", " ");
  return h("span", { class: `badge status-${status}`, dataset: { status } }, label);
}

function badge(status) {
  return h("span", { class: `badge status-${status}`, dataset: { status } }, statusLabel(status));
}

function progressBar(progress) {
  const done = (progress && progress.done) || 0;
  const total = (progress && progress.total) || 0;
  return h(
    "span",
    { class: "progress" },
    h("progress", { max: Math.max(total, 1), value: done, "aria-label": t("progress") }),
    h("span", { class: "small muted" }, `${done}/${total}`),
  );
}

function slotList(type, slots) {
  const names = Object.keys(slots || {});
  if (!names.length) return h("p", { class: "muted small" }, t("noSlots"));
  return h(
    "dl",
    { class: "slots" },
    names.map((n) => [
      h("dt", {}, slotLabel(type, n)),
      h("dd", { dataset: { slot: n } }, fmtValue(slots[n])),
    ]),
  );
}

// ---- language ------------------------------------------------------------------------

function applyLanguage() {
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
  $("#lang").value = state.lang;
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-label]")) {
    el.setAttribute("aria-label", t(el.dataset.i18nLabel));
  }
  // A hint with code in it: its English is the page's own markup, kept for going back.
  for (const el of document.querySelectorAll("[data-i18n-hint]")) {
    if (!el.dataset.en) el.dataset.en = el.innerHTML;
    if (state.lang === "en") el.innerHTML = el.dataset.en;
    else el.textContent = t(el.dataset.i18nHint);
  }
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) {
    el.placeholder = t(el.dataset.i18nPlaceholder);
  }
}

function setLanguage(lang) {
  state.lang = lang === "zh" ? "zh" : "en";
  localStorage.setItem(LANG_STORE, state.lang);
  applyLanguage();
  renderTasks();
  greet();
  if (state.task) {
    showTask(state.task);
    refreshTask(); // the journal's sentences come from the server in its language
  }
}

// The empty chat says what the agents can do, in the dashboard's language.
function greet() {
  const log = $("#chat-log");
  const only = log.children.length === 0 || (log.children.length === 1 && log.firstChild.dataset.greeting);
  if (!only || !state.agents) return;
  const names = state.agents.agents.map((a) => title(a.type));
  const li = addMessage("assistant", t("greeting", { agents: names.join(state.lang === "zh" ? "、" : ", ") }));
  li.dataset.greeting = "true";
  if (log.children.length > 1) log.firstChild.remove();
}

async function loadAgents() {
  try {
    state.agents = await api("GET", "/v1/agents");
  } catch (err) {
    state.agents = null;
    showError(err);
  }
}

// ---- sign in -------------------------------------------------------------------------

async function signIn(key) {
  clearError();
  const me = await api("GET", "/v1/me", undefined, key);
  state.key = key;
  state.me = me;
  sessionStorage.setItem(KEY_STORE, key);
  $("#user-id").textContent = me.user_id + (me.admin ? " (admin)" : "");
  $("#whoami").hidden = false;
  $("#sign-in-panel").hidden = true;
  $("#app").hidden = false;
  startOps();
  await loadAgents();
  applyLanguage();
  await Promise.all([loadMessages(), loadTasks()]);
  greet();
  const fromHash = location.hash.match(/^#\/tasks\/([^/]+)$/);
  if (fromHash) openTask(decodeURIComponent(fromHash[1]));
  else $("#chat-input").focus();
}

function signOut(reason) {
  closeTask();
  state.key = null;
  state.me = null;
  sessionStorage.removeItem(KEY_STORE);
  setSession(null); // the Session is the signed-out user's: the next one starts its own
  state.tasks = [];
  $("#whoami").hidden = true;
  $("#app").hidden = true;
  $("#sign-in-panel").hidden = false;
  $("#key-input").value = "";
  $("#chat-log").replaceChildren();
  $("#task-list").replaceChildren();
  clearMemory();
  stopOps();
  if (typeof reason === "string" && reason) {
    $("#error-text").textContent = `Signed out: ${reason}`;
    $("#error-banner").hidden = false;
  }
  $("#key-input").focus();
}

// ---- chat ----------------------------------------------------------------------------

function setSession(id) {
  state.sessionId = id;
  if (id) localStorage.setItem(SESSION_STORE, id);
  else localStorage.removeItem(SESSION_STORE);
  $("#session-id").textContent = id || "new";
}

function addMessage(role, text, taskId) {
  const li = h(
    "li",
    { class: `msg msg-${role}`, dataset: { role } },
    h("span", { class: "who" }, t(role === "user" ? "you" : role === "assistant" ? "agent" : "error")),
    h("span", { class: "text" }, text),
    taskId && role === "assistant"
      ? h("a", { href: `#/tasks/${encodeURIComponent(taskId)}`, class: "small" }, t("openTask"))
      : null,
  );
  const log = $("#chat-log");
  log.append(li);
  log.scrollTop = log.scrollHeight;
  return li;
}

// The Session's earlier messages, so a reload continues the same conversation.
async function loadMessages() {
  $("#chat-log").replaceChildren();
  $("#session-id").textContent = state.sessionId || "new";
  if (!state.sessionId) return;
  try {
    const data = await api(
      "GET",
      `/v1/sessions/${encodeURIComponent(state.sessionId)}/messages?limit=50`,
    );
    // Oldest first whatever order the page comes in (ids grow with time).
    const messages = [...data.messages].sort((a, b) => a.id - b.id);
    for (const m of messages) addMessage(m.role, m.text, m.task_id);
  } catch (err) {
    // A Session that expired or belongs to another key: start a new one on the next message.
    if (err instanceof ApiError && err.status === 404) setSession(null);
    else showError(err);
  }
}

async function sendMessage(text) {
  const input = $("#chat-input");
  const send = $("#chat-send");
  input.disabled = send.disabled = true;
  addMessage("user", text);
  try {
    if (!state.sessionId) {
      const created = await api("POST", "/v1/sessions", {});
      setSession(created.session.id);
    }
    const { turn } = await sendTurn(text);
    addMessage("assistant", turn.reply, turn.task && turn.task.id);
    input.value = "";
    await loadTasks();
    if (turn.task && turn.task.id === state.taskId) {
      refreshTask();
      scheduleContext(true); // the turn is in memory now, whatever the Task's version
    }
  } catch (err) {
    addMessage("error", `${err.code || "error"}: ${err.message}`);
    showError(err);
  } finally {
    input.disabled = send.disabled = false;
    input.focus();
  }
}

// ---- the Task list -------------------------------------------------------------------

async function loadTasks() {
  try {
    const status = $("#task-filter").value;
    const data = await api("GET", `/v1/tasks?status=${encodeURIComponent(status)}&limit=100`);
    state.tasks = sortTasks(data.tasks);
    renderTasks();
  } catch (err) {
    showError(err);
  }
}

// Needs-attention first (a person has to act on those), then the most recently updated.
function sortTasks(tasks) {
  const rank = (t) => (t.status === "needs_attention" ? 0 : 1);
  const newer = (a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0);
  return [...tasks].sort((a, b) => rank(a) - rank(b) || newer(a, b));
}

function renderTasks() {
  const rows = state.tasks.map((task) =>
    h(
      "li",
      {
        class: `task-row${task.id === state.taskId ? " selected" : ""}`,
        dataset: { taskId: task.id, status: task.status, stage: task.stage },
      },
      h(
        "button",
        { type: "button", class: "task-open", onclick: () => openTask(task.id) },
        h("span", { class: "task-type" }, title(task.type)),
        state.me && state.me.admin
          ? h("span", { class: "owner", dataset: { owner: task.user_id } }, `${t("user")}: ${task.user_id}`)
          : null,
        badge(task.status),
        h("span", { class: "stage" }, `${t("stage")}: ${stageLabel(task.type, task.stage)}`),
        progressBar(task.progress),
      ),
      h("p", { class: "status-text" }, task.status_text),
      slotList(task.type, task.slots),
      h("p", { class: "small muted" }, `${t("updated")} ${fmtTime(task.updated_at)} · v${task.version}`),
    ),
  );
  $("#task-list").replaceChildren(...rows);
  $("#task-empty").hidden = rows.length > 0;
}

// Keep the list's row of the open Task in step with its live updates.
function patchTaskRow(task) {
  const i = state.tasks.findIndex((t) => t.id === task.id);
  if (i < 0) return;
  const { actions: _, ...plain } = task;
  state.tasks[i] = plain;
  state.tasks = sortTasks(state.tasks);
  renderTasks();
}

// ---- the Task page -------------------------------------------------------------------

async function openTask(id) {
  clearError();
  if (state.taskId !== id) closeTask();
  state.taskId = id;
  state.followLatest = true;
  if (location.hash !== `#/tasks/${encodeURIComponent(id)}`) {
    // a page of its own: the browser's back button goes back to where it was opened from
    history.pushState({ task: id }, "", `#/tasks/${encodeURIComponent(id)}`);
  }
  $("#app").classList.add("viewing-task");
  $("#task-page").hidden = false;
  $("#task-page").dataset.taskId = id;
  window.scrollTo(0, 0);
  renderTasks();
  await refreshTask();
  if (state.taskId === id) connectEvents(id);
}

function closeTask() {
  if (state.events) state.events.close();
  clearTimeout(state.reopenTimer);
  state.events = null;
  state.taskId = null;
  state.task = null;
  state.history = null;
  state.replayed = null;
  $("#replayed-state").replaceChildren();
  clearContext();
  $("#task-page").hidden = true;
  $("#app").classList.remove("viewing-task");
  delete $("#task-page").dataset.taskId;
  setLive("off", "offline");
}

// Back from a Task's page: through the browser's history when the dashboard put the page
// there (so its back button and ours agree), else straight to the list.
function leaveTask() {
  if (history.state && history.state.task) {
    history.back();
    return;
  }
  closeTask();
  history.replaceState(null, "", location.pathname);
  renderTasks();
}

// The header's panel links lead to the main page; the browser's back button returns to the
// Task that was open.
function toMainPage() {
  if (!state.taskId) return;
  closeTask();
  history.pushState(null, "", location.pathname);
  renderTasks();
}

async function refreshTask() {
  const id = state.taskId;
  if (!id) return;
  try {
    const [{ task }, journal] = await Promise.all([
      api("GET", `/v1/tasks/${encodeURIComponent(id)}`),
      api("GET", `/v1/tasks/${encodeURIComponent(id)}/history?language=${state.lang}`),
    ]);
    if (state.taskId !== id) return; // the user opened another Task meanwhile
    state.history = journal;
    showTask(task);
  } catch (err) {
    showError(err);
    if (err instanceof ApiError && err.status === 404) closeTask();
  }
}

function showTask(task) {
  // Answers can cross (an event, a turn, a button): never go back to an older version.
  if (state.task && state.task.id === task.id && task.version < state.task.version) return;
  state.task = task;
  const page = $("#task-page");
  page.dataset.status = task.status;
  page.dataset.stage = task.stage;
  page.dataset.version = task.version;
  $("#task-title").textContent = title(task.type);
  const facts = [
    [t("id"), h("code", {}, task.id)],
    ...(state.me && state.me.admin ? [[t("user"), task.user_id]] : []),
    [t("status"), badge(task.status)],
    [t("stage"), stageLabel(task.type, task.stage)],
    [t("progress"), progressBar(task.progress)],
    [t("version"), String(task.version)],
    [t("goal"), task.goal || "—"],
    [t("createdUpdated"), `${fmtTime(task.created_at)} / ${fmtTime(task.updated_at)}`],
  ];
  $("#task-summary").replaceChildren(
    h(
      "dl",
      { class: "facts" },
      facts.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
    ),
    h("p", { class: "status-text" }, task.status_text),
  );
  renderControls(task);
  renderActions(task.actions || []);
  renderSlots(task);
  renderTimeline();
  scheduleContext(false);
}

function renderControls(task) {
  const buttons = [];
  const act = (label, path, body) =>
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        onclick: async () => {
          try {
            const url = `/v1/tasks/${encodeURIComponent(task.id)}${path}`;
            const data = await api("POST", url, body);
            showTask(data.task);
            loadTasks();
          } catch (err) {
            showError(err);
          }
        },
      },
      label,
    );
  const open = ["waiting_user", "running", "needs_attention"].includes(task.status);
  if (task.status === "waiting_user" && task.stage === "confirming" && !task.confirmed) {
    buttons.push(act(t("confirm"), "/confirm", { yes: true, version: task.version }));
    buttons.push(act(t("decline"), "/confirm", { yes: false, version: task.version }));
  }
  if (open) buttons.push(act(t("resume"), "/resume"), act(t("cancel"), "/cancel"));
  $("#task-controls").replaceChildren(...buttons);
}

// A table cell with its column's name, shown beside the value when a phone stacks the table.
function cell(label, attrs, ...children) {
  return h("td", { ...attrs, "data-label": label }, h("div", { class: "cell" }, ...children));
}

function renderActions(actions) {
  $("#actions-empty").hidden = actions.length > 0;
  $("#actions-table").hidden = actions.length === 0;
  const canResolve = state.me && state.me.admin;
  const rows = actions.map((a) =>
    h(
      "tr",
      { class: "action-row", dataset: { actionId: a.id, actionName: a.name, status: a.status } },
      cell("#", {}, String(a.seq)),
      cell(t("action"), {}, h("strong", {}, a.name), a.kind !== "step" ? ` (${a.kind})` : null),
      cell(
        t("status"),
        {},
        actionBadge(a.status),
        a.error
          ? h(
              "div",
              { class: "small error-text" },
              a.error_kind === "programming" ? t("programmingError") : null,
              fmtValue(a.error),
            )
          : null,
        canResolve && needsAPerson(a) ? resolveButtons(a) : null,
      ),
      cell(t("attempts"), {}, `${a.attempts}${a.checks ? ` ${t("checks", { n: a.checks })}` : ""}`),
      cell(t("idempotencyKey"), {}, h("code", { class: "key" }, a.idempotency_key)),
      cell(
        t("createdUpdated"),
        { class: "small" },
        fmtTime(a.created_at),
        h("br"),
        fmtTime(a.updated_at),
        h("span", { class: "muted" }, ` (${fmtDuration(a.created_at, a.updated_at)})`),
      ),
      cell(t("output"), {}, outputOf(a.output)),
    ),
  );
  $("#actions-table tbody").replaceChildren(...rows);
}

// An operator decides what happened to an Action the runtime could not settle.
// An Action an operator settles: its outcome is unknown, or its own code raised an error.
function needsAPerson(action) {
  return action.status === "unknown" || action.error_kind === "programming";
}

function resolveButtons(action) {
  const post = (what, body) => async () => {
    try {
      const path = `/v1/actions/${encodeURIComponent(action.id)}/${what}`;
      const data = await api("POST", path, body);
      showTask(data.task);
    } catch (err) {
      showError(err);
    }
  };
  const buttons = ["success", "failed"].map((outcome) =>
    h(
      "button",
      { type: "button", class: "secondary", onclick: post("resolve", { outcome }) },
      `Resolve: ${outcome}`,
    ),
  );
  if (action.error_kind === "programming") {
    buttons.push(
      h(
        "button",
        { type: "button", class: "secondary", onclick: post("rerun") },
        "Run again (after the fix)",
      ),
    );
  }
  return h("div", { class: "resolve" }, ...buttons);
}

// Each slot's values over time, read from the journal: version 1 (or the baseline) holds the
// whole Task, later entries change ["task", "slots", NAME].
function slotHistory() {
  const byName = {};
  const note = (name, version, value) => (byName[name] ||= []).push({ version, value });
  const { baseline, entries } = state.history || { baseline: null, entries: [] };
  const initial = baseline && baseline.state && baseline.state.task;
  if (initial) {
    for (const [n, v] of Object.entries(initial.slots || {})) note(n, baseline.version, v);
  }
  for (const entry of entries || []) {
    for (const change of entry.changes) {
      const p = change.path;
      if (p.length === 1 && p[0] === "task" && change.after) {
        for (const [n, v] of Object.entries(change.after.slots || {})) note(n, entry.version, v);
      } else if (p.length === 2 && p[0] === "task" && p[1] === "slots") {
        for (const [n, v] of Object.entries(change.after || {})) note(n, entry.version, v);
      } else if (p.length === 3 && p[0] === "task" && p[1] === "slots") {
        note(p[2], entry.version, "after" in change ? change.after : undefined);
      }
    }
  }
  return byName;
}

function renderSlots(task) {
  const hist = slotHistory();
  const slots = task.slots || {};
  // Filled, then missing, then any a past version had (a value that was removed).
  const names = [
    ...new Set([...Object.keys(slots), ...(task.missing_slots || []), ...Object.keys(hist)]),
  ];
  const rows = names.map((n) => {
    const filled = Object.prototype.hasOwnProperty.call(slots, n);
    return h(
      "tr",
      { class: "slot-row", dataset: { slot: n } },
      h("th", { scope: "row" }, slotLabel(task.type, n)),
      cell(t("value"), { class: filled ? "" : "muted" }, filled ? fmtValue(slots[n]) : t("missing")),
      cell(
        t("history"),
        { class: "slot-history small" },
        (hist[n] || []).map((c) =>
          h("span", { class: "hist" }, `v${c.version}: ${fmtValue(c.value)}`),
        ),
      ),
    );
  });
  $("#slots-table tbody").replaceChildren(...rows);
}

// ---- the Task's context (what its next turn is given from memory) ---------------------

function contextKey() {
  const task = state.task;
  if (!task) return null;
  return `${task.id}@${task.version} ${$("#context-budget").value} ${$("#context-query").value.trim()}`;
}

// Fetch the context if the section is open and what it shows is stale (another Task, version,
// budget or query); `force` also when nothing of those changed (a turn added to memory).
// Coalesced: an event, a turn and a refresh arriving together make one request.
function scheduleContext(force) {
  if (!$("#context-section").open || !state.task) return;
  if (!force && state.contextFor === contextKey()) return;
  clearTimeout(state.contextTimer);
  state.contextTimer = setTimeout(loadContext, 80);
}

async function loadContext() {
  clearTimeout(state.contextTimer);
  const task = state.task;
  if (!task || !$("#context-section").open) return;
  const seq = ++state.contextSeq;
  const key = contextKey();
  const budget = $("#context-budget").value;
  const query = $("#context-query").value.trim();
  const params = new URLSearchParams({ budget });
  if (query) params.set("q", query);
  const url = `/v1/tasks/${encodeURIComponent(task.id)}/context?${params}`;
  const section = $("#context-section");
  section.dataset.loading = "true";
  try {
    const data = await api("GET", url);
    if (seq !== state.contextSeq || !state.task || state.task.id !== task.id) return;
    state.contextFor = key;
    state.contextData = data;
    $("#context-error").hidden = true;
    renderContext(data);
  } catch (err) {
    if (seq !== state.contextSeq) return;
    state.contextFor = null;
    $("#context-error").textContent = errorText(err);
    $("#context-error").hidden = false;
    if (err instanceof ApiError && err.status === 401) showError(err);
  } finally {
    if (seq === state.contextSeq) delete section.dataset.loading;
  }
}

function renderContext(data) {
  const result = $("#context-result");
  result.hidden = false;
  result.dataset.tokens = String(data.tokens);
  result.dataset.budget = String(data.budget);
  $("#context-usage").replaceChildren(
    h("progress", {
      max: Math.max(data.budget, 1),
      value: Math.min(data.tokens, data.budget),
      "aria-label": "tokens used",
    }),
    h("strong", {}, `${data.tokens} / ${data.budget} tokens`),
  );
  $("#context-asked").textContent = data.query ? `for the query “${data.query}”` : "";
  $("#context-prompt").textContent = data.prompt || "(empty: nothing fits this budget)";
  // The layer filter offers the layers this answer has, in their order, with counts.
  const layers = [];
  for (const d of data.explanation) if (!layers.includes(d.layer)) layers.push(d.layer);
  const select = $("#context-layer");
  const chosen = layers.includes(select.value) ? select.value : "";
  const count = (layer) => data.explanation.filter((d) => d.layer === layer).length;
  select.replaceChildren(
    h("option", { value: "" }, `all (${data.explanation.length})`),
    ...layers.map((l) => h("option", { value: l }, `${l} (${count(l)})`)),
  );
  select.value = chosen;
  renderExplanation();
}

function renderExplanation() {
  const data = state.contextData;
  if (!data) return;
  const layer = $("#context-layer").value;
  const shown = data.explanation.filter((d) => !layer || d.layer === layer);
  const kept = shown.filter((d) => d.kept).length;
  $("#context-counts").textContent = `${kept} kept, ${shown.length - kept} dropped`;
  const rows = shown.map((d) => {
    const verdict = d.kept ? "kept" : "dropped";
    return h(
      "tr",
      {
        class: `candidate ${verdict}`,
        dataset: { candidate: d.id, layer: d.layer, kept: String(d.kept) },
      },
      h("th", { scope: "row" }, h("code", { class: "key" }, d.id)),
      cell("Layer", {}, d.layer),
      cell("Score", { class: "num" }, fmtScore(d.score)),
      cell("Tokens", { class: "num" }, String(d.tokens)),
      cell("Kept", {}, h("span", { class: `badge verdict-${verdict}` }, verdict)),
      cell("Reason", { class: "reason small" }, d.reason),
    );
  });
  $("#context-table tbody").replaceChildren(...rows);
}

function clearContext() {
  clearTimeout(state.contextTimer);
  state.contextSeq++;
  state.contextFor = null;
  state.contextData = null;
  $("#context-result").hidden = true;
  $("#context-error").hidden = true;
  $("#context-prompt").textContent = "";
  $("#context-table tbody").replaceChildren();
}

function fmtScore(score) {
  if (typeof score !== "number") return "—";
  return Number.isInteger(score) ? String(score) : score.toFixed(3);
}

// ---- memory search -------------------------------------------------------------------

// The query's words to highlight: runs of letters and digits (two or more, or one that is not
// ASCII); a run of Chinese characters also by its pairs, as it has no spaces between words.
function queryWords(query) {
  const words = [];
  for (const run of query.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []) {
    if (run.length > 1 || !/^[a-z0-9]$/.test(run)) words.push(run);
    if (/\p{Script=Han}{3,}/u.test(run)) {
      for (let i = 0; i + 2 <= run.length; i++) words.push(run.slice(i, i + 2));
    }
  }
  return [...new Set(words)];
}

// `text` as nodes with the query's words in <mark>: text nodes only, never HTML.
function highlighted(text, words) {
  if (!words.length) return [text];
  const escaped = words
    .sort((a, b) => b.length - a.length)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const parts = String(text).split(new RegExp(`(${escaped.join("|")})`, "giu"));
  return parts.map((part, i) => (i % 2 ? h("mark", {}, part) : part)).filter((p) => p !== "");
}

async function searchMemory() {
  const namespace = $("#memory-namespace").value.trim();
  const query = $("#memory-query").value.trim();
  const mode = $("#memory-mode").value;
  const k = $("#memory-k").value.trim() || "10";
  if (!namespace || !query) return;
  const seq = ++state.memorySeq;
  const panel = $("#memory-panel");
  const status = $("#memory-status");
  const error = $("#memory-error");
  panel.dataset.loading = "true";
  status.textContent = "Searching…";
  const params = new URLSearchParams({ q: query, k, mode });
  try {
    const { hits } = await api(
      "GET",
      `/v1/memory/${encodeURIComponent(namespace)}/search?${params}`,
    );
    if (seq !== state.memorySeq) return;
    error.hidden = true;
    panel.dataset.hits = String(hits.length);
    const where = `for “${query}” in ${namespace} (${mode})`;
    status.textContent = hits.length
      ? `${hits.length} hit${hits.length === 1 ? "" : "s"} ${where}`
      : `No hits ${where}.`;
    const words = queryWords(query);
    $("#memory-hits").replaceChildren(...hits.map((hit) => memoryHit(hit, words)));
  } catch (err) {
    if (seq !== state.memorySeq) return;
    delete panel.dataset.hits;
    status.textContent = "";
    error.textContent = errorText(err);
    error.hidden = false;
    $("#memory-hits").replaceChildren();
    if (err instanceof ApiError && err.status === 401) showError(err);
  } finally {
    if (seq === state.memorySeq) delete panel.dataset.loading;
  }
}

function memoryHit(hit, words) {
  const meta = hit.metadata || {};
  const role = meta.role === "user" ? "You" : meta.role === "assistant" ? "Agent" : meta.role;
  const ranks = Object.entries(hit.ranks || {}).map(([how, rank]) => `${how} #${rank}`);
  return h(
    "li",
    { class: "hit", dataset: { itemId: hit.id, role: meta.role || "" } },
    h(
      "div",
      { class: "hit-head small" },
      h("span", { class: "score", title: ranks.join(", ") || null }, "score ", fmtScore(hit.score)),
      role ? h("span", { class: "who" }, String(role)) : null,
      h("span", { class: "muted" }, fmtTime(hit.time || hit.added_at)),
      hit.task_id
        ? h("a", { href: `#/tasks/${encodeURIComponent(hit.task_id)}` }, "open Task")
        : null,
      h("code", { class: "key muted" }, hit.id),
    ),
    h("p", { class: "hit-text" }, highlighted(hit.text, words)),
  );
}

function clearMemory() {
  state.memorySeq++;
  $("#memory-hits").replaceChildren();
  $("#memory-status").textContent = "";
  $("#memory-error").hidden = true;
  delete $("#memory-panel").dataset.hits;
}

// ---- operators: Builds and workers (an operator's admin key only) ---------------------

const OPS_EVERY_MS = 5000;
const SILENT_AFTER_S = 90; // upgrades.SILENT_AFTER: no heartbeat for this long, likely dead

function opsShown() {
  return Boolean(state.me && state.me.admin) && !$("#ops-panel").hidden;
}

// A user's key never sees the panel (and never asks: the endpoints answer 403).
function startOps() {
  const admin = Boolean(state.me && state.me.admin);
  $("#ops-panel").hidden = !admin;
  $("#ops-link").hidden = !admin;
  if (admin) loadOps();
  else stopOps();
}

function stopOps() {
  clearTimeout(state.opsTimer);
  state.opsTimer = null;
  state.opsSeq++;
  state.opsLoadedAt = 0;
  $("#ops-panel").hidden = true;
  $("#ops-link").hidden = true;
  $("#ops-error").hidden = true;
  $("#ops-updated").textContent = "";
  for (const what of ["builds", "workers"]) {
    $(`#${what}-table tbody`).replaceChildren();
    $(`#${what}-table`).hidden = true;
    $(`#${what}-empty`).hidden = true;
  }
  delete $("#ops-panel").dataset.loading;
}

// Polls only while the panel is on screen in a visible page; coming back to it refreshes at
// once if the last answer is older than the period.
function opsWatched() {
  return opsShown() && state.opsOnScreen && document.visibilityState === "visible";
}

function wakeOps() {
  clearTimeout(state.opsTimer);
  state.opsTimer = null;
  if (!opsWatched() || $("#ops-panel").dataset.loading) return;
  const wait = state.opsLoadedAt + OPS_EVERY_MS - Date.now();
  state.opsTimer = setTimeout(loadOps, Math.max(wait, 0));
}

async function loadOps() {
  clearTimeout(state.opsTimer);
  state.opsTimer = null;
  if (!opsShown()) return;
  const seq = ++state.opsSeq;
  const panel = $("#ops-panel");
  const error = $("#ops-error");
  panel.dataset.loading = "true";
  const stopped = $("#workers-stopped").checked ? "?stopped=true" : "";
  try {
    const [{ builds }, { workers }] = await Promise.all([
      api("GET", "/v1/builds"),
      api("GET", `/v1/workers${stopped}`),
    ]);
    if (seq !== state.opsSeq) return;
    error.hidden = true;
    renderBuilds(builds);
    renderWorkers(workers);
    $("#ops-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (seq !== state.opsSeq) return;
    // The last tables stay, under the error; "updated" still tells when they were read.
    error.textContent = errorText(err);
    error.hidden = false;
    if (err instanceof ApiError && err.status === 401) showError(err);
  } finally {
    if (seq === state.opsSeq) {
      delete panel.dataset.loading;
      state.opsLoadedAt = Date.now();
      wakeOps();
    }
  }
}

function fmtProcesses(processes) {
  const parts = Object.entries(processes || {}).map(([role, n]) => `${n} ${role}`);
  return parts.join(", ") || "none";
}

function renderBuilds(builds) {
  $("#builds-empty").hidden = builds.length > 0;
  $("#builds-table").hidden = builds.length === 0;
  const rows = builds.map((b) => {
    const retire = b.can_retire ? "yes" : "no";
    return h(
      "tr",
      {
        class: `build-row retire-${retire}`,
        dataset: {
          build: b.build,
          pinned: String(b.pinned_open_tasks),
          started: String(b.open_tasks_started),
          canRetire: String(b.can_retire),
        },
      },
      h("th", { scope: "row" }, h("code", { class: "key" }, b.build)),
      cell("Processes", { class: "processes" }, fmtProcesses(b.processes)),
      cell("Pinned open Tasks", { class: "num pinned" }, String(b.pinned_open_tasks)),
      cell("Open Tasks started", { class: "num" }, String(b.open_tasks_started)),
      cell("Queued pinned work", { class: "num" }, String(b.queued_pinned_work)),
      cell(
        "Can retire",
        {},
        h(
          "span",
          {
            class: `badge retire retire-${retire}`,
            title: b.can_retire ? null : "open Tasks are pinned to this Build: keep its workers",
          },
          retire,
        ),
      ),
    );
  });
  $("#builds-table tbody").replaceChildren(...rows);
}

// A worker's id is host/pid/start/nonce: the nonce tells processes apart, the rest is shown.
function shortId(id) {
  const parts = String(id).split("/");
  if (parts.length >= 4) return parts[parts.length - 1];
  return id.length > 12 ? `${id.slice(0, 12)}…` : id;
}

function fmtAge(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function renderWorkers(workers) {
  $("#workers-empty").hidden = workers.length > 0;
  $("#workers-table").hidden = workers.length === 0;
  const rows = workers.map((w) => {
    const stopped = Boolean(w.stopped_at);
    const silent = !stopped && w.heartbeat_age_s !== null && w.heartbeat_age_s >= SILENT_AFTER_S;
    return h(
      "tr",
      {
        class: `worker-row${stopped ? " stopped" : ""}${silent ? " silent" : ""}`,
        dataset: { workerId: w.id, role: w.role, build: w.build, stopped: String(stopped) },
      },
      h(
        "th",
        { scope: "row" },
        h("code", { class: "key", title: w.id }, shortId(w.id)),
        h("span", { class: "small muted" }, ` ${w.host} · pid ${w.pid}`),
      ),
      cell("Role", {}, w.role),
      cell("Build", {}, h("code", { class: "key" }, w.build)),
      cell("Claimed", { class: "num" }, String(w.claimed)),
      cell(
        "Heartbeat age",
        { class: "num heartbeat" },
        fmtAge(w.heartbeat_age_s),
        silent ? h("span", { class: "badge silent" }, "silent") : null,
        stopped
          ? h("span", { class: "badge stopped", title: fmtTime(w.stopped_at) }, "stopped")
          : null,
      ),
    );
  });
  $("#workers-table tbody").replaceChildren(...rows);
}

// ---- the journal and its replay slider -----------------------------------------------

function versions() {
  const { baseline, entries } = state.history || { baseline: null, entries: [] };
  const list = (entries || []).map((e) => e.version);
  if (baseline) list.unshift(baseline.version);
  return list;
}

function renderTimeline() {
  const { entries } = state.history || { entries: [] };
  const list = (entries || []).map((e) =>
    h(
      "li",
      { class: "timeline-entry", dataset: { version: e.version } },
      h(
        "button",
        { type: "button", class: "link", onclick: () => moveSlider(e.version) },
        `v${e.version}`,
      ),
      h("span", { class: "reason" }, e.reason.split("\n")[0]),
      h("span", { class: "small muted" }, ` · ${e.actor} · ${fmtTime(e.at)}`),
      h("ul", { class: "said" }, (e.said || []).map((line) => h("li", {}, line))),
      h(
        "details",
        { class: "changes small" },
        h("summary", {}, t("bookkeeping", { n: e.changes.length })),
        h("ul", {}, e.changes.map((c) => h("li", {}, describeChange(c)))),
      ),
    ),
  );
  if (state.history && state.history.baseline) {
    const b = state.history.baseline;
    list.unshift(
      h(
        "li",
        { class: "timeline-entry baseline", dataset: { version: b.version } },
        h(
          "button",
          { type: "button", class: "link", onclick: () => moveSlider(b.version) },
          `v${b.version}`,
        ),
        h("span", { class: "reason" }, "baseline (earlier entries compacted)"),
        h("span", { class: "small muted" }, ` · ${fmtTime(b.at)}`),
      ),
    );
  }
  $("#timeline").replaceChildren(...list);

  const vs = versions();
  const slider = $("#timeline-slider");
  slider.disabled = vs.length === 0;
  if (!vs.length) return;
  slider.min = vs[0];
  slider.max = vs[vs.length - 1];
  if (state.followLatest || Number(slider.value) > vs[vs.length - 1]) slider.value = slider.max;
  onSlider();
}

function describeChange(c) {
  const path = c.path.join(".");
  if (c.path.length === 1) return `${path}: created`;
  if (c.path[0] === "actions" && c.path.length === 2) {
    return `${path}: ${c.after ? `${c.after.name} ${c.after.status}` : "removed"}`;
  }
  const text = fmtValue("after" in c ? c.after : undefined);
  return `${path} → ${text.length > 80 ? `${text.slice(0, 77)}…` : text}`;
}

function moveSlider(version) {
  $("#timeline-slider").value = version;
  onSlider();
}

function onSlider() {
  const slider = $("#timeline-slider");
  const at = Number(slider.value);
  state.followLatest = at === Number(slider.max);
  $("#timeline-label").textContent = t("of", { a: at, b: slider.max });
  for (const li of document.querySelectorAll(".timeline-entry")) {
    li.classList.toggle("current", Number(li.dataset.version) === at);
  }
  if (state.replayed !== `${state.taskId}@${at}`) replayAt(at);
  else {
    state.replaySeq++; // already shown: drop answers still coming for other positions
    delete $("#replayed-state").dataset.loading;
  }
}

// The server replays the journal; the newest answer for the newest slider position wins.
async function replayAt(at) {
  const seq = ++state.replaySeq;
  const id = state.taskId;
  const box = $("#replayed-state");
  box.dataset.loading = "true";
  try {
    const { task } = await api("GET", `/v1/tasks/${encodeURIComponent(id)}/state?at=${at}`);
    if (seq !== state.replaySeq || id !== state.taskId) return;
    state.replayed = `${id}@${at}`;
    box.dataset.version = String(at);
    box.dataset.stage = task.stage;
    box.dataset.status = task.status;
    box.dataset.slotCount = String(Object.keys(task.slots || {}).length);
    const summary = [
      h("strong", {}, t("atVersion", { v: at })),
      `${t("stage")} `,
      h("span", { class: "replayed-stage" }, stageLabel(task.type, task.stage)),
      `, ${t("status")} `,
      badge(task.status),
      `, ${t("actionCount", { n: (task.actions || []).length })}`,
    ];
    box.replaceChildren(
      h("p", {}, summary),
      h("p", { class: "small status-text" }, task.status_text),
      slotList(task.type, task.slots),
    );
  } catch (err) {
    if (seq === state.replaySeq) showError(err);
  } finally {
    if (seq === state.replaySeq) delete box.dataset.loading;
  }
}

// ---- live updates --------------------------------------------------------------------

function setLive(mode, word) {
  const el = $("#live-status");
  el.dataset.state = mode;
  el.dataset.i18n = word; // a language switch renames it too
  el.textContent = t(word);
}

// EventSource cannot send an Authorization header, and a key in a URL would land in logs:
// the stream is opened with a token good for one minute and this Task only (POST
// .../events/token). It reconnects by itself after network errors (e.g. a server restart);
// when the browser gives up (an HTTP error: the token expired) we ask for a new token and
// open it again a little later while the page is open.
async function connectEvents(id) {
  if (state.events) state.events.close();
  clearTimeout(state.reopenTimer);
  let token;
  try {
    ({ token } = await api("POST", `/v1/tasks/${encodeURIComponent(id)}/events/token`));
  } catch (err) {
    setLive("off", "retrying");
    state.reopenTimer = setTimeout(() => state.taskId === id && connectEvents(id), 3000);
    return;
  }
  if (state.taskId !== id) return;
  const url = `/v1/tasks/${encodeURIComponent(id)}/events?token=${encodeURIComponent(token)}`;
  const source = new EventSource(url);
  state.events = source;
  setLive("connecting", "connecting");
  source.addEventListener("open", () => setLive("live", "live"));
  source.addEventListener("task", (ev) => {
    if (state.events !== source) return;
    setLive("live", "live");
    let task;
    try {
      task = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (task.task) task = task.task; // tolerate {"task": ...} as well as the bare Task
    if (task.id !== state.taskId) return;
    patchTaskRow(task);
    const known = versions();
    // A version the page has no journal entry for yet: fetch the journal again.
    if (!known.length || task.version > known[known.length - 1]) refreshTask();
    else showTask(task);
  });
  source.addEventListener("error", () => {
    if (state.events !== source) return;
    if (source.readyState === EventSource.CLOSED) {
      setLive("off", "retrying");
      state.reopenTimer = setTimeout(() => state.taskId === id && connectEvents(id), 3000);
    } else {
      setLive("connecting", "reconnecting");
    }
  });
}

// ---- wiring --------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("#sign-in-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = $("#key-input").value.trim();
    if (!key) return;
    const button = $("#sign-in");
    button.disabled = true;
    try {
      await signIn(key);
    } catch (err) {
      showError(err);
    } finally {
      button.disabled = false;
    }
  });
  $("#sign-out").addEventListener("click", () => signOut());
  $("#error-close").addEventListener("click", clearError);
  $("#chat-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("#chat-input").value.trim();
    if (text) sendMessage(text);
  });
  $("#new-session").addEventListener("click", () => {
    setSession(null);
    $("#chat-log").replaceChildren();
    greet();
    $("#chat-input").focus();
  });
  $("#lang").addEventListener("change", (ev) => setLanguage(ev.target.value));
  applyLanguage();
  $("#task-filter").addEventListener("change", loadTasks);
  $("#tasks-refresh").addEventListener("click", loadTasks);
  $("#task-back").addEventListener("click", leaveTask);
  // Debounced: dragging the slider asks the server for one replay, not one per pixel
  // (each key has a request rate limit).
  let sliderTimer = null;
  $("#timeline-slider").addEventListener("input", () => {
    const slider = $("#timeline-slider");
    $("#timeline-label").textContent = t("of", { a: slider.value, b: slider.max });
    // At once, not after the debounce: a refresh arriving meanwhile must not move it back.
    state.followLatest = Number(slider.value) === Number(slider.max);
    clearTimeout(sliderTimer);
    sliderTimer = setTimeout(onSlider, 120);
  });
  $("#context-section").addEventListener("toggle", () => scheduleContext(false));
  $("#context-budget").addEventListener("change", loadContext);
  $("#context-layer").addEventListener("change", renderExplanation);
  $("#context-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    loadContext();
  });
  // Typing a query rebuilds after a pause (each key has a request rate limit).
  let contextTyping = null;
  $("#context-query").addEventListener("input", () => {
    clearTimeout(contextTyping);
    contextTyping = setTimeout(() => scheduleContext(false), 400);
  });
  $("#memory-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    searchMemory();
  });
  $("#memory-link").addEventListener("click", () => {
    toMainPage();
    $("#memory-panel").scrollIntoView({ behavior: "smooth", block: "start" });
    $("#memory-query").focus({ preventScroll: true });
  });
  $("#ops-link").addEventListener("click", () => {
    toMainPage();
    $("#ops-panel").scrollIntoView({ behavior: "smooth", block: "start" });
  });
  $("#ops-refresh").addEventListener("click", loadOps);
  $("#workers-stopped").addEventListener("change", loadOps);
  new IntersectionObserver((seen) => {
    state.opsOnScreen = seen[seen.length - 1].isIntersecting;
    wakeOps();
  }).observe($("#ops-panel"));
  document.addEventListener("visibilitychange", wakeOps);
  $("#home-link").addEventListener("click", (ev) => {
    ev.preventDefault();
    if (state.taskId) leaveTask();
  });
  // Links in the chat ("open Task") and the browser's back and forward buttons move
  // through #/tasks/ID; any other address is the main page.
  const follow = () => {
    if (!state.me) return;
    const m = location.hash.match(/^#\/tasks\/([^/]+)$/);
    if (m) openTask(decodeURIComponent(m[1]));
    else if (state.taskId) {
      closeTask();
      renderTasks();
    }
  };
  window.addEventListener("hashchange", follow);
  window.addEventListener("popstate", follow);

  if (state.key) {
    signIn(state.key).catch((err) => {
      if (err instanceof ApiError && err.status === 401) {
        signOut(err.message); // a stored key that no longer works: back to the form
      } else {
        // The server is away (or erring): keep the key, show the form and why.
        $("#key-input").value = state.key;
        $("#sign-in-panel").hidden = false;
        showError(err);
      }
    });
  } else {
    $("#sign-in-panel").hidden = false;
    $("#key-input").focus();
  }
});

"use strict";
// The page of `ordo serve`: sends the pasted sentences to POST /v1/translate for one or two models and draws,
// for the chosen sentence, the links, the source in target order, Kendall's tau, RIBES and the attention.

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let answers = [];  // per model slot: the JSON answer of /v1/translate, or null
let chosen = 0;    // the sentence whose detail is shown
let busy = false;  // a translation is under way: Ctrl+Enter and the button wait for it
const batchLimits = {};  // model name -> the most sentences one request may hold (the server's limit)

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function loadModels() {
  try {
    const reply = await fetch("/v1/models");
    const models = await reply.json();
    for (const model of models) {
      for (const slot of [0, 1]) {
        const option = document.createElement("option");
        option.value = model.name;
        option.textContent = `${model.name} (${model.methods.join("+") || model.family})`;
        $(`model-${slot}`).appendChild(option);
      }
      batchLimits[model.name] = model.max_batch_sentences;
    }
    if (models.length) $("beam").value = models[0].beam_size;
  } catch (err) {
    showError(`Could not list the models: ${err}`);
  }
}

function lines(id) {
  return $(id).value.split("\n").map((line) => line.replace(/\r$/, ""));
}

async function post(body) {
  try {
    return await fetch("/v1/translate", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
  } catch (err) {
    throw new Error(`Could not reach the server; is ordo serve still running? (${err.message})`);
  }
}

async function translateChunk(model, text, references) {
  const body = { model, text, beam_size: Number($("beam").value) || 1, return_attention: true, return_alignment: true };
  if (references) body.references = references;
  const reply = await post(body);
  const data = await reply.json().catch(() => ({ detail: reply.statusText }));
  if (!reply.ok) {
    const detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    throw new Error(`The server refused the request (${reply.status}): ${detail}`);
  }
  return data;
}

// One answer for all of `text`, sent in requests of at most the server's max_batch_sentences sentences each;
// progress(count) reports the sentences done. With two models an error names the model it came from.
async function translateWith(model, text, references, progress, named) {
  const size = batchLimits[model] || text.length;
  const answer = { model, translations: [], sentences: [] };
  try {
    for (let start = 0; start < text.length; start += size) {
      progress(start);
      const part = await translateChunk(model, text.slice(start, start + size),
                                        references && references.slice(start, start + size));
      answer.translations.push(...part.translations);
      answer.sentences.push(...part.sentences);
    }
  } catch (err) {
    throw named ? new Error(`${model}: ${err.message}`) : err;
  }
  return answer;
}

async function translate() {
  if (busy) return;
  let text = lines("sources");
  while (text.length > 1 && text[text.length - 1] === "") text.pop();
  if (!text.some((line) => line.trim())) {
    $("status").textContent = "";
    showError("Paste at least one sentence.");
    return;
  }
  const refs = lines("references").slice(0, text.length);
  const references = refs.some((line) => line.trim()) ? text.map((_, i) => refs[i] || "") : null;
  const models = [$("model-0").value, $("model-1").value];
  showError("");
  busy = true;
  $("translate").disabled = true;
  const chosenModels = models.filter((m) => m);
  const done = models.map(() => 0);  // sentences done per slot: the status counts both models' work
  const total = text.length * chosenModels.length;
  const progress = (slot) => (count) => {
    done[slot] = count;
    const all = done.reduce((a, b) => a + b, 0);
    $("status").textContent = all ? `Translating… (${all} of ${total} sentences done)` : "Translating…";
  };
  const named = chosenModels.length > 1;
  try {
    answers = await Promise.all(models.map((m, slot) => (
      m ? translateWith(m, text, references, progress(slot), named) : null)));
    chosen = 0;
    render(text);
    $("status").textContent = `${text.length} sentence${text.length > 1 ? "s" : ""} translated`;
  } catch (err) {
    $("status").textContent = "";
    showError(err.message);
  } finally {
    busy = false;
    $("translate").disabled = false;
  }
}

function render(text) {
  document.querySelectorAll(".model-name").forEach((th) => {
    const answer = answers[Number(th.dataset.slot)];
    th.textContent = answer ? answer.model : "";
    th.hidden = !answer;
  });
  const body = $("translations").querySelector("tbody");
  body.replaceChildren();
  text.forEach((source, index) => {
    const row = body.insertRow();
    row.dataset.index = index;
    row.insertCell().textContent = index + 1;
    row.insertCell().textContent = source;
    answers.forEach((answer) => {
      if (!answer) return;
      const cell = row.insertCell();
      cell.className = "translation";
      cell.textContent = answer.translations[index];
    });
    const choose = () => { chosen = index; renderDetails(); };
    row.tabIndex = 0;  // reachable with Tab; Enter or Space shows its detail as a click does
    row.addEventListener("click", choose);
    row.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" && event.key !== " ") return;
      event.preventDefault();
      choose();
    });
  });
  $("results").hidden = false;
  renderDetails();
}

function renderDetails() {
  document.querySelectorAll("#translations tbody tr").forEach((row) => {
    const selected = Number(row.dataset.index) === chosen;
    row.classList.toggle("selected", selected);
    if (selected) row.setAttribute("aria-current", "true"); else row.removeAttribute("aria-current");
  });
  const panel = $("details");
  panel.replaceChildren();
  answers.forEach((answer, slot) => {
    if (!answer) return;
    const sentence = answer.sentences[chosen];
    const view = $("detail-template").content.firstElementChild.cloneNode(true);
    view.id = `detail-${slot}`;
    view.querySelector("h2").textContent = `${answer.model}: sentence ${chosen + 1}`;
    figures(view.querySelector(".figures"), sentence);
    view.querySelector(".links").appendChild(linkDrawing(sentence));
    view.querySelector(".reordered").textContent = (sentence.source_in_target_order || []).join(" ");
    const heat = view.querySelector(".heatmap");
    heat.id = `heatmap-${slot}`;
    heatmap(heat, sentence);
    panel.appendChild(view);
  });
  panel.hidden = false;
}

function figures(list, sentence) {
  const items = [["Kendall τ of the links", sentence.tau], ["RIBES", sentence.ribes], ["score", sentence.score]];
  for (const [name, value] of items) {
    if (value === undefined || value === null) continue;
    const item = document.createElement("div");
    const term = document.createElement("dt");
    const data = document.createElement("dd");
    term.textContent = name;
    data.textContent = value.toFixed(3);
    data.dataset.figure = name;
    item.append(term, data);
    list.appendChild(item);
  }
}

function textWidth(word) {
  let width = 0;
  for (const ch of word) width += ch.codePointAt(0) > 0x2e80 ? 14 : 8;  // CJK characters are wider
  return width + 14;
}

function placeWords(words) {
  const xs = [];
  let x = 4;
  for (const word of words) { xs.push(x + textWidth(word) / 2); x += textWidth(word); }
  return { xs, width: x + 4 };
}

function linkDrawing(sentence) {
  const source = sentence.source_units || [], target = sentence.target_units || [];
  const top = placeWords(source), bottom = placeWords(target);
  const svg = document.createElementNS(SVG, "svg");
  const width = Math.max(top.width, bottom.width, 200);
  svg.setAttribute("width", width);
  svg.setAttribute("height", 110);
  svg.setAttribute("class", "link-drawing");
  for (const [s, t] of sentence.links || []) {
    const line = document.createElementNS(SVG, "line");
    line.setAttribute("x1", top.xs[s]); line.setAttribute("y1", 24);
    line.setAttribute("x2", bottom.xs[t]); line.setAttribute("y2", 84);
    line.setAttribute("stroke", s === t ? "#8aa4c4" : "#1f5fa8");
    line.setAttribute("stroke-width", 1.5);
    line.setAttribute("class", "link");
    svg.appendChild(line);
  }
  const label = (word, x, y, cls) => {
    const node = document.createElementNS(SVG, "text");
    node.setAttribute("x", x); node.setAttribute("y", y);
    node.setAttribute("text-anchor", "middle");
    node.setAttribute("class", cls);
    node.textContent = word;
    svg.appendChild(node);
  };
  source.forEach((word, i) => label(word, top.xs[i], 16, "source-word"));
  target.forEach((word, i) => label(word, bottom.xs[i], 100, "target-word"));
  return svg;
}

function heatmap(table, sentence) {
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  for (const token of sentence.source_tokens) {
    const th = document.createElement("th");
    th.textContent = token;
    head.appendChild(th);
  }
  const body = table.createTBody();
  (sentence.attention || []).forEach((weights, row) => {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.textContent = sentence.target_tokens[row];
    tr.appendChild(th);
    weights.forEach((weight) => {
      const cell = tr.insertCell();
      cell.className = "cell";
      cell.title = weight.toFixed(3);
      cell.style.background = `rgba(31, 95, 168, ${Math.min(1, weight).toFixed(3)})`;
      if (weight >= 0.5) cell.style.color = "#fff";
      cell.textContent = weight >= 0.1 ? Math.round(weight * 100) : "";
    });
  });
}

$("translate").addEventListener("click", translate);
for (const id of ["sources", "references"]) {
  $(id).addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) translate();
  });
}
loadModels();

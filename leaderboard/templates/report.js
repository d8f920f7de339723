(function(){
 function key(td){var v=td.getAttribute('data-v');if(v===null||v===''){return null;}
  var n=Number(v);return isNaN(n)?v.toLowerCase():n;}
 function sortTable(table,col,dir){
  var tb=table.querySelector('tbody.ranked');if(!tb){return;}
  var rows=Array.prototype.slice.call(tb.rows);
  rows.sort(function(a,b){var x=key(a.cells[col]),y=key(b.cells[col]);
   if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
   var c=(typeof x==='number'&&typeof y==='number')?x-y:(String(x)<String(y)?-1:String(x)>String(y)?1:0);
   return dir==='asc'?c:-c;});
  rows.forEach(function(r){tb.appendChild(r);});
  var ths=table.tHead.rows[0].cells;
  for(var i=0;i<ths.length;i++){ths[i].removeAttribute('aria-sort');}
  ths[col].setAttribute('aria-sort',dir==='asc'?'ascending':'descending');
  table.setAttribute('data-sorted',col+':'+dir);}
 window.lbSort=sortTable;
 document.querySelectorAll('table.lb').forEach(function(table){
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){
   var cur=th.getAttribute('aria-sort');var dir=cur==='descending'?'asc':(cur==='ascending'?'desc':
    (th.getAttribute('data-hib')==='0'?'asc':'desc'));sortTable(table,i,dir);});});});
 var m=/^#sort=([A-Za-z0-9_-]+):(\d+):(asc|desc)$/.exec(location.hash);
 if(m){var t=document.getElementById(m[1]);if(t&&t.tHead&&+m[2]<t.tHead.rows[0].cells.length){
  sortTable(t,+m[2],m[3]);}}
 var box=document.getElementById('model-filter'),count=document.getElementById('filter-count');
 function filter(){var q=box.value.trim().toLowerCase();var shown=0,all=0;
  document.querySelectorAll('tr[data-model]').forEach(function(tr){all++;
   var hit=!q||tr.getAttribute('data-model').toLowerCase().indexOf(q)>=0;tr.hidden=!hit;if(hit){shown++;}});
  count.textContent=q?(shown+' of '+all+' rows match'):'';}
 if(box){box.addEventListener('input',filter);filter();}
})();
